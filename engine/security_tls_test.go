package engine_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/props"
)

// mutualPKI is a throwaway CA, a broker certificate for 127.0.0.1 and a
// client certificate, with broker TLS settings that require a client
// certificate signed by the CA.
type mutualPKI struct {
	caFile   string      // the CA, PEM (ssl.truststore.location)
	keystore string      // the client's certificate and key, PEM (ssl.keystore.location)
	server   *tls.Config // requires and verifies client certificates
}

func newMutualPKI(t *testing.T) mutualPKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kmirror mTLS test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	serverDER, serverKey := leaf(2, "kmirror test broker", x509.ExtKeyUsageServerAuth)
	clientDER, clientKey := leaf(3, "kmirror", x509.ExtKeyUsageClientAuth)

	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	keystore := filepath.Join(dir, "client.pem")
	ks := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientDER}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})...)
	if err := os.WriteFile(keystore, ks, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return mutualPKI{caFile: caFile, keystore: keystore, server: &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{serverDER}, PrivateKey: serverKey}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSecurityTLSDestination mirrors a plaintext source into a destination
// that accepts only TLS, its certificate checked against a PEM trust store
// (settings as --command-config gives them): the admin actions, the
// instance's __mirror_state clients and kmirror's own produce connections
// all speak TLS.
func TestSecurityTLSDestination(t *testing.T) {
	pki := newTestPKI(t)
	settings := map[string]string{"security.protocol": "SSL", "ssl.truststore.location": pki.caFile}
	src := newSecuredSide(t, "kmirror-test-source", nil)
	dst := newSecuredSide(t, "kmirror-test-destination", settings, kfake.TLS(pki.server))
	mirrorThrough(t, src, nil, dst)
}

// TestSecurityMutualTLS: both clusters require a client certificate
// (ssl.keystore.location, one PEM file with the certificate and its key).
// Without it, the destination refuses the engine and the source refuses
// --create; with it, the mirror runs end to end and stays identical.
func TestSecurityMutualTLS(t *testing.T) {
	srcPKI, dstPKI := newMutualPKI(t), newMutualPKI(t)
	srcSettings := map[string]string{"security.protocol": "SSL", "ssl.truststore.location": srcPKI.caFile, "ssl.keystore.location": srcPKI.keystore}
	dstSettings := map[string]string{"security.protocol": "SSL", "ssl.truststore.location": dstPKI.caFile, "ssl.keystore.location": dstPKI.keystore}
	src := newSecuredSide(t, "kmirror-test-source", srcSettings, kfake.TLS(srcPKI.server))
	dst := newSecuredSide(t, "kmirror-test-destination", dstSettings, kfake.TLS(dstPKI.server))

	t.Run("no client certificate", func(t *testing.T) {
		ctx := context.Background()
		noCert := map[string]string{"security.protocol": "SSL", "ssl.truststore.location": dstPKI.caFile}
		if adm, err := engine.NewAdmin(ctx, dst.c.Addrs(), noCert, 5*time.Second); err == nil {
			adm.Close()
			t.Fatal("the destination accepted an admin without a client certificate")
		}
		opts, err := engine.SecurityOpts(noCert)
		if err != nil {
			t.Fatal(err)
		}
		if eng, err := engine.New(ctx, engine.Config{Destination: dst.c.Addrs(), DestinationOpts: opts, ConnectTimeout: 5 * time.Second}); err == nil {
			eng.Close()
			t.Fatal("the destination accepted an engine without a client certificate")
		}
		adm, err := engine.NewAdmin(ctx, dst.c.Addrs(), dstSettings, 30*time.Second)
		if err != nil {
			t.Fatalf("admin with a client certificate: %v", err)
		}
		defer adm.Close()
		_, err = adm.CreateMirror(ctx, "no-cert", props.FromMap(map[string]string{
			"bootstrap.servers": strings.Join(src.c.Addrs(), ","), "security.protocol": "SSL", "ssl.truststore.location": srcPKI.caFile,
		}), false)
		if err == nil {
			t.Fatal("create against a source requiring a client certificate succeeded without one")
		}
		t.Logf("refused: %v", err)
	})
	t.Run("with client certificates", func(t *testing.T) {
		mirrorThrough(t, src, srcSettings, dst)
	})
}
