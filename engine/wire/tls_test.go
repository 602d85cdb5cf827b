package wire

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/engine/enginetest"
)

func TestTLS(t *testing.T) {
	pki := enginetest.NewPKI(t)
	cluster := newCluster(t, kfake.TLS(pki.ServerOnly))
	addr := cluster.ListenAddrs()[0]

	ctx := testCtx(t)
	c := dialTest(t, ctx, addr, Options{TLS: &tls.Config{RootCAs: pki.Pool(), MinVersion: tls.VersionTLS12}})
	if _, ok := c.nc.(*tls.Conn); !ok {
		t.Fatalf("connection is %T, want *tls.Conn", c.nc)
	}
	if _, _, err := metadata(ctx, c, testTopic, 0); err != nil {
		t.Fatalf("metadata over TLS: %v", err)
	}

	t.Run("untrusted CA", func(t *testing.T) {
		_, err := Dial(failFast(t), addr, Options{TLS: &tls.Config{RootCAs: x509.NewCertPool()}})
		t.Logf("untrusted: %v", err)
		if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
			t.Fatalf("err = %v, want a certificate verification error", err)
		}
	})
	t.Run("plaintext to TLS listener", func(t *testing.T) {
		_, err := Dial(failFast(t), addr, Options{DialTimeout: 5 * time.Second})
		t.Logf("plaintext: %v", err)
		if err == nil || errors.Is(err, ErrAuthFailed) {
			t.Fatalf("err = %v, want a connection error", err)
		}
	})
}
