package operator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/setpoint-dev/setpoint/sdk/abi"
	"github.com/setpoint-dev/setpoint/sdk/plugin"
)

// HTTP methods and statuses the service's API uses. (net/http is not
// imported: it would add its client and TLS to the module, which never
// use them; the host makes the calls.)
const (
	methodGet    = "GET"
	methodPost   = "POST"
	methodPut    = "PUT"
	methodDelete = "DELETE"

	statusOK                  = 200
	statusCreated             = 201
	statusNoContent           = 204
	statusBadRequest          = 400
	statusUnauthorized        = 401
	statusForbidden           = 403
	statusNotFound            = 404
	statusConflict            = 409
	statusUnprocessableEntity = 422
)

// statusText names the statuses a message shows.
var statusText = map[int]string{
	400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
	422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
	502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
}

// Record is a DNS record as the service's API has it.
type Record struct {
	ID      string `json:"id,omitempty"`
	Zone    string `json:"zone,omitempty"`
	Name    string `json:"name"`
	Type    string `json:"type"`
	Value   string `json:"value"`
	TTL     int64  `json:"ttl"`
	Owner   string `json:"owner,omitempty"`
	Version int64  `json:"version,omitempty"`
}

// String describes r in messages: "www.example.com A 192.0.2.10 (ttl 300)".
func (r Record) String() string {
	return fmt.Sprintf("%s.%s %s %s (ttl %d)", r.Name, r.Zone, r.Type, r.Value, r.TTL)
}

// APIError is an answer of the service other than the one asked for.
type APIError struct {
	// Op is what was asked ("create record www.example.com A").
	Op string
	// Status is the HTTP status; Message the service's error text.
	Status  int
	Message string
}

func (e *APIError) Error() string {
	msg := strings.TrimSpace(fmt.Sprintf("%s: the service answered %d %s", e.Op, e.Status, statusText[e.Status]))
	switch {
	case e.Status == statusUnauthorized || e.Status == statusForbidden:
		msg += " (check the token in the credentials Secret)"
	case e.Message != "":
		msg += ": " + e.Message
	}
	return msg
}

// ExistsError is a create refused because the zone holds a record of that
// name and type: Record is that record, as the service holds it now.
type ExistsError struct {
	Record Record
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("record %s exists as %s", e.Record, e.Record.ID)
}

// service calls the DNS service's API for one reconcile, through the
// host's egress call (plugin.HTTP), which the Plugin's spec.egress grants
// or denies.
type service struct {
	h     plugin.Host
	base  string
	token string
}

func (s *service) recordsURL(zone string) string {
	return s.base + "/v1/zones/" + url.PathEscape(zone) + "/records"
}

// call sends a request and decodes a JSON answer of status want into out.
// It returns the status it got and, for another one, an *APIError.
func (s *service) call(op, method, u string, in, out any, want ...int) (int, error) {
	req := abi.HTTPRequest{Method: method, URL: u, Headers: map[string]string{
		"Authorization": "Bearer " + s.token,
		"Accept":        "application/json",
	}}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", op, err)
		}
		req.Body = b
		req.Headers["Content-Type"] = "application/json"
	}
	resp, err := plugin.HTTP(s.h, req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	status := int(resp.Status)
	for _, w := range want {
		if status != w {
			continue
		}
		if out != nil && len(resp.Body) > 0 {
			if err := json.Unmarshal(resp.Body, out); err != nil {
				return status, fmt.Errorf("%s: the service's answer is not the JSON expected: %w", op, err)
			}
		}
		return status, nil
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(resp.Body, &e)
	return status, &APIError{Op: op, Status: status, Message: e.Error}
}

// get reads a record by ID; found is false on 404.
func (s *service) get(zone, id string) (rec Record, found bool, err error) {
	code, err := s.call("read record "+id, methodGet, s.recordsURL(zone)+"/"+url.PathEscape(id), nil, &rec, statusOK, statusNotFound)
	return rec, code == statusOK, err
}

// find lists the records of a name and type in a zone.
func (s *service) find(zone, name, typ string) ([]Record, error) {
	var out struct {
		Records []Record `json:"records"`
	}
	q := url.Values{"name": {name}, "type": {typ}}
	_, err := s.call("find record "+name+"."+zone+" "+typ, methodGet, s.recordsURL(zone)+"?"+q.Encode(), nil, &out, statusOK)
	return out.Records, err
}

// create creates a record; a 409 is an *ExistsError with the record that
// exists.
func (s *service) create(r Record) (Record, error) {
	var out struct {
		Record
		Existing Record `json:"record"`
	}
	code, err := s.call("create record "+r.Name+"."+r.Zone+" "+r.Type, methodPost, s.recordsURL(r.Zone), r, &out, statusCreated, statusConflict)
	if err != nil {
		return Record{}, err
	}
	if code == statusConflict {
		return Record{}, &ExistsError{Record: out.Existing}
	}
	return out.Record, nil
}

// update sets a record's value and TTL.
func (s *service) update(zone, id, value string, ttl int64) (Record, error) {
	var out Record
	in := map[string]any{"value": value, "ttl": ttl}
	_, err := s.call("update record "+id, methodPut, s.recordsURL(zone)+"/"+url.PathEscape(id), in, &out, statusOK)
	return out, err
}

// remove deletes a record; found is false when it was gone already (404).
func (s *service) remove(zone, id string) (found bool, err error) {
	code, err := s.call("delete record "+id, methodDelete, s.recordsURL(zone)+"/"+url.PathEscape(id), nil, nil, statusNoContent, statusOK, statusNotFound)
	return code != statusNotFound, err
}

// isNotFound reports whether err is the service's 404.
func isNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == statusNotFound
}

// isInvalid reports whether err is the service refusing a request as
// invalid (400, 422).
func isInvalid(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Status == statusBadRequest || ae.Status == statusUnprocessableEntity)
}
