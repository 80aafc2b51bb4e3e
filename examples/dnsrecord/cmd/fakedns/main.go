// Command fakedns runs the fake DNS provider of the DNSRecord example
// (package examples/dnsrecord/fakedns) on a loopback address until it is
// interrupted:
//
//	go build -o bin/fakedns ./examples/dnsrecord/cmd/fakedns
//	bin/fakedns --token-file TOKEN [--listen 127.0.0.1:8053] [--delay 500ms] [--error-rate 0.05]
//
// The token is read from a file, never from the command line, where other
// users of the machine could see it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/setpoint-dev/setpoint/examples/dnsrecord/fakedns"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fakedns:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8053", "the loopback address to serve on (port 0 picks a free one)")
	tokenFile := flag.String("token-file", "", "the file holding the bearer token clients must send (required)")
	addrFile := flag.String("addr-file", "", "a file to write the address served on to, once it serves")
	delay := flag.Duration("delay", 500*time.Millisecond, "how long a write stays invisible to reads")
	errorRate := flag.Float64("error-rate", 0, "the share of API requests, from 0 to 1, that answer 500")
	seed := flag.Uint64("seed", 1, "the seed of the random failures")
	flag.Parse()

	if *tokenFile == "" {
		return errors.New("--token-file is required")
	}
	b, err := os.ReadFile(*tokenFile)
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return fmt.Errorf("%s holds no token", *tokenFile)
	}
	if *errorRate < 0 || *errorRate > 1 {
		return fmt.Errorf("--error-rate %v is not between 0 and 1", *errorRate)
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %s: serve on a loopback address (127.0.0.1)", *listen)
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv := fakedns.New(fakedns.Options{Token: token, Delay: *delay, ErrorRate: *errorRate, Seed: *seed, Logger: log})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	if *addrFile != "" {
		// Written under another name and renamed, so a reader never sees
		// half an address.
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			return err
		}
	}
	log.Info("fakedns serving", "url", "http://"+addr, "delay", *delay, "errorRate", *errorRate)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(shutdown)
}
