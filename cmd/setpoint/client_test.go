package main

import (
	"errors"
	"sync"
	"testing"

	"k8s.io/klog/v2"
)

// TestConnectConcurrently: after the first connection, the CLI's later
// ones, made at once while Kubernetes' libraries log through klog, build
// their clients without racing on klog's logger (run with -race): connect
// silences klog once, before anything of client-go runs.
func TestConnectConcurrently(t *testing.T) {
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	connect := func() error {
		o := &clientOptions{server: "https://127.0.0.1:1", token: "t", insecure: true}
		c, err := o.connect()
		if err != nil {
			return err
		}
		if c.config.Host != "https://127.0.0.1:1" || c.namespace != "default" {
			return errors.New("connect: host " + c.config.Host + ", namespace " + c.namespace)
		}
		return nil
	}
	if err := connect(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				klog.ErrorS(errors.New("a client-go failure"), "logged while connecting", "n", i)
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			if err := connect(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(stop)
	<-logged
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
