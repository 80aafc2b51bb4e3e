package testsupport

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/net/http2"
)

// HTTP2ClientConn opens one HTTP/2 connection to srv, a started TLS
// httptest server that offers h2, whose streams each take window bytes
// before their reader must read. The caller closes it.
func HTTP2ClientConn(t testing.TB, srv *httptest.Server, window int) *http2.ClientConn {
	t.Helper()
	t2, err := http2.ConfigureTransports(&http.Transport{HTTP2: &http.HTTP2Config{MaxReceiveBufferPerStream: window}})
	if err != nil {
		t.Fatal(err)
	}
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "example.com", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := t2.NewClientConn(conn)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	return cc
}
