package wire

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// testPKI is a throwaway CA and a server certificate for 127.0.0.1 signed
// by it.
type testPKI struct {
	pool   *x509.CertPool
	server tls.Certificate
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kmirror test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kmirror test broker"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{
		pool:   pool,
		server: tls.Certificate{Certificate: [][]byte{srvDER, caDER}, PrivateKey: srvKey},
	}
}

func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	cluster := newCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pki.server}, MinVersion: tls.VersionTLS12}))
	addr := cluster.ListenAddrs()[0]

	ctx := testCtx(t)
	c := dialTest(t, ctx, addr, Options{TLS: &tls.Config{RootCAs: pki.pool, MinVersion: tls.VersionTLS12}})
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
