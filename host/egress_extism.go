package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	extism "github.com/extism/go-sdk"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// egressModule is the namespace the host serves an Extism guest's
// http_request, http_status_code and http_headers from, in place of
// extism/go-sdk's: the SDK's http_request sends through
// http.DefaultClient (the environment's proxy, any address, redirects
// anywhere) after checking only the host name against the manifest's
// allowed_hosts. The host renames those imports (see routeTrace) and
// serves them with the plugin's egress grant, so that Extism kits' HTTP
// helpers get the same checks as the http host function: scheme, port and
// method, loopback and link-local addresses checked at dial time, every
// redirect hop, the size cap, the timeout, the concurrency and rate
// limits, the CA bundle, the metrics and the log line.
//
// As in Extism, a call that gets no response (not granted, timed out,
// over the size cap) traps with a message that says why, and a response of
// any status is a response.
const egressModule = "setpoint:egress"

func init() {
	if len(egressModule) != len(extismEnv) {
		panic("egressModule must be as long as extismEnv: the imports are renamed in place")
	}
}

// extismHTTPRequest is the request document of Extism's http_request.
type extismHTTPRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
}

// extismHTTP is what http_status_code and http_headers report: the last
// response of the call.
type extismHTTP struct {
	status  int32
	headers map[string]string
}

// egressFuncs serve the renamed imports.
func egressFuncs() []extism.HostFunction {
	i64 := []extism.ValueType{extism.ValueTypeI64}
	request := extism.NewHostFunctionWithStack("http_request", func(ctx context.Context, cp *extism.CurrentPlugin, stack []uint64) {
		s := scopeOf(ctx)
		if s == nil {
			panic(errors.New("host function called outside a plugin call"))
		}
		s.calls++
		if s.calls > s.p.cfg.Limits.MaxHostCalls {
			panic(errBudget)
		}
		s.extismHTTP = extismHTTP{}
		doc, err := cp.ReadBytes(stack[0])
		if err != nil {
			panic(fmt.Errorf("http_request: %w", err))
		}
		cp.Free(stack[0])
		var r extismHTTPRequest
		if err := json.Unmarshal(doc, &r); err != nil {
			panic(fmt.Errorf("http_request: invalid request: %w", err))
		}
		req := abi.HTTPRequest{Method: r.Method, URL: r.URL, Headers: r.Headers}
		if stack[1] != 0 {
			if req.Body, err = cp.ReadBytes(stack[1]); err != nil {
				panic(fmt.Errorf("http_request: the body: %w", err))
			}
			cp.Free(stack[1])
		}
		resp := s.egress(ctx, req)
		if resp.Error != "" {
			panic(errors.New(resp.Error))
		}
		s.extismHTTP.status = resp.Status
		s.extismHTTP.headers = make(map[string]string, len(resp.Headers))
		for k, v := range resp.Headers {
			s.extismHTTP.headers[strings.ToLower(k)] = v
		}
		stack[0] = 0
		if len(resp.Body) > 0 {
			offs, err := cp.WriteBytes(resp.Body)
			if err != nil {
				panic(fmt.Errorf("http_request: %w", err))
			}
			stack[0] = offs
		}
	}, []extism.ValueType{extism.ValueTypeI64, extism.ValueTypeI64}, i64)
	status := extism.NewHostFunctionWithStack("http_status_code", func(ctx context.Context, cp *extism.CurrentPlugin, stack []uint64) {
		var code int32
		if s := scopeOf(ctx); s != nil {
			code = s.extismHTTP.status
		}
		stack[0] = uint64(uint32(code))
	}, nil, []extism.ValueType{extism.ValueTypeI32})
	headers := extism.NewHostFunctionWithStack("http_headers", func(ctx context.Context, cp *extism.CurrentPlugin, stack []uint64) {
		stack[0] = 0
		s := scopeOf(ctx)
		if s == nil || s.extismHTTP.headers == nil {
			return
		}
		b, err := json.Marshal(s.extismHTTP.headers)
		if err != nil {
			panic(fmt.Errorf("http_headers: %w", err))
		}
		offs, err := cp.WriteBytes(b)
		if err != nil {
			panic(fmt.Errorf("http_headers: %w", err))
		}
		stack[0] = offs
	}, nil, i64)
	fs := []extism.HostFunction{request, status, headers}
	for i := range fs {
		fs[i].SetNamespace(egressModule)
	}
	return fs
}

// extismAllowedHosts are the host names of a grant, as Extism's
// allowed_hosts lists them; the host sets them on each instance it calls.
// They decide nothing: the host's own checks, which replace the SDK's
// http_request, go further (scheme, port, method, address).
func extismAllowedHosts(g *Egress) []string {
	if g == nil {
		return []string{}
	}
	hosts := make([]string, 0, len(g.Allow))
	for _, r := range g.Allow {
		hosts = append(hosts, r.Host)
	}
	return hosts
}
