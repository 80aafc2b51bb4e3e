package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

type pluginLogsOptions struct {
	client    clientOptions
	follow    bool
	object    string
	tail      int
	since     time.Duration
	sinceTime string
}

func newPluginLogsCommand() *cobra.Command {
	o := &pluginLogsOptions{}
	cmd := &cobra.Command{
		Use:   "logs NAME [-f] [--object KIND/NAME] [--tail N] [--since DURATION | --since-time TIME]",
		Short: "Print a plugin's recent log lines",
		Long: `Print the recent log lines of the plugin NAME: what its log host calls (and
its kit's log functions) wrote, as the server keeps them (the last 1,000 lines
or 1 MiB, whichever is less). Each line has the time, the level, the object the
call was about ("-" for none), the message and its attributes. A plugin that
logs faster than the server's limit has lines dropped; the log says how many.

-f follows the log: new lines are printed as they come, until interrupted.
--object KIND/NAME (NAME may be NAMESPACE/NAME) keeps the lines about one
object.

` + exitCodeHelp,
		Example: `  setpoint plugin logs widget
  setpoint plugin logs widget -f --object Widget/default/w1
  setpoint plugin logs widget --tail 20 --since 5m`,
		Args: rangeArgs(1, 1, "NAME [flags]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPluginLogs(cmd.Context(), o, args[0], cmd.OutOrStdout())
		},
	}
	addClientFlags(cmd, &o.client)
	f := cmd.Flags()
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing new lines as they come")
	f.StringVar(&o.object, "object", "", "only the lines about this object, as KIND/NAME or KIND/NAMESPACE/NAME")
	f.IntVar(&o.tail, "tail", -1, "only the last N lines (-1: all the server keeps)")
	f.DurationVar(&o.since, "since", 0, "only the lines newer than this, such as 5m")
	f.StringVar(&o.sinceTime, "since-time", "", "only the lines at or after this RFC 3339 time")
	return cmd
}

// pluginLogQuery is the query of the log subresource for o.
func pluginLogQuery(o *pluginLogsOptions) (url.Values, error) {
	q := url.Values{}
	if o.follow {
		q.Set("follow", "true")
	}
	if o.object != "" {
		if k, n, ok := strings.Cut(o.object, "/"); !ok || k == "" || n == "" {
			return nil, exitError(exitUsage, fmt.Errorf("--object %q: want KIND/NAME or KIND/NAMESPACE/NAME, such as Widget/w1", o.object))
		}
		q.Set("object", o.object)
	}
	if o.tail >= 0 {
		q.Set("tailLines", strconv.Itoa(o.tail))
	}
	switch {
	case o.since != 0 && o.sinceTime != "":
		return nil, exitError(exitUsage, errors.New("--since and --since-time: give at most one"))
	case o.since < 0:
		return nil, exitError(exitUsage, fmt.Errorf("--since %v: want a positive duration", o.since))
	case o.since > 0:
		q.Set("sinceSeconds", strconv.FormatInt(int64((o.since+time.Second-1)/time.Second), 10))
	case o.sinceTime != "":
		if _, err := time.Parse(time.RFC3339, o.sinceTime); err != nil {
			return nil, exitError(exitUsage, fmt.Errorf("--since-time %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", o.sinceTime))
		}
		q.Set("sinceTime", o.sinceTime)
	}
	return q, nil
}

func runPluginLogs(ctx context.Context, o *pluginLogsOptions, name string, stdout io.Writer) error {
	q, err := pluginLogQuery(o)
	if err != nil {
		return err
	}
	c, err := o.client.connect()
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(c.config)
	if o.follow {
		cfg.Timeout = 0 // a followed log is never cut
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("HTTP client: %w", err)
	}
	path := "/apis/" + pluginGVR.Group + "/" + pluginGVR.Version + "/plugins/" + url.PathEscape(name) + "/log"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.Host, "/")+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain, application/json")
	req.Header.Set("User-Agent", cfg.UserAgent)
	resp, err := hc.Do(req)
	if err != nil {
		return c.explain(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var st metav1.Status
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			if st.Code == http.StatusNotFound {
				return exitError(exitNotFound, fmt.Errorf("no plugin %q; `setpoint plugin list` shows the installed ones", name))
			}
			return fmt.Errorf("plugin logs %s: %s", name, st.Message)
		}
		return fmt.Errorf("plugin logs %s: %s: %s", name, resp.Status, strings.TrimSpace(string(body)))
	}
	if _, err := io.Copy(stdout, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("plugin logs %s: %w", name, err)
	}
	return nil
}
