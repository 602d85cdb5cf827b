package enginetest

import (
	"bytes"
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
	"testing"
	"time"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// PKI is a throwaway CA, a broker certificate for 127.0.0.1 and localhost
// and a client certificate, with broker TLS settings that require a client
// certificate signed by the CA (kfake.TLS(p.Server)). The stores a Kafka
// client is given are written on demand, in each format kmirror reads.
type PKI struct {
	CA         *x509.Certificate
	Client     *x509.Certificate
	ClientKey  *ecdsa.PrivateKey
	CAFile     string      // the CA, PEM (ssl.truststore.location)
	PEMKeys    string      // the client's certificate and key, PEM (ssl.keystore.location)
	Server     *tls.Config // requires and verifies client certificates
	ServerOnly *tls.Config // the same broker certificate, no client certificate asked
	dir        string
}

// NewPKI creates a PKI whose files live in a test temporary directory.
func NewPKI(t testing.TB) PKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kmirror test CA"},
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
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey) {
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
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, key
	}
	server, serverKey := leaf(2, "kmirror test broker", x509.ExtKeyUsageServerAuth)
	client, clientKey := leaf(3, "kmirror", x509.ExtKeyUsageClientAuth)

	p := PKI{CA: ca, Client: client, ClientKey: clientKey, dir: dir}
	p.CAFile = p.write(t, "ca.pem", pemCert(ca))
	pkcs8, err := x509.MarshalPKCS8PrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	p.PEMKeys = p.write(t, "client.pem", append(pemCert(client), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})...))
	p.ServerOnly = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{server.Raw}, PrivateKey: serverKey}},
	}
	p.Server = p.ServerOnly.Clone()
	p.Server.ClientAuth, p.Server.ClientCAs = tls.RequireAndVerifyClientCert, p.Pool()
	return p
}

// Pool is a certificate pool holding the CA, for a client's tls.Config.
func (p PKI) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.CA)
	return pool
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func (p PKI) write(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// PKCS12Keystore writes the client's key, certificate and the CA as a
// PKCS#12 file protected by password the way a current keytool or openssl
// writes it (PBES2 with AES-256 and PBKDF2-HMAC-SHA256, an HMAC-SHA256
// integrity check), and returns its path.
func (p PKI) PKCS12Keystore(t testing.TB, password string) string {
	t.Helper()
	der, err := pkcs12.Modern2023.Encode(p.ClientKey, p.Client, []*x509.Certificate{p.CA}, password)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, "client.p12", der)
}

// PKCS12Truststore writes the CA as a PKCS#12 trust store (the certificate
// marked trusted, as keytool -importcert does) and returns its path.
func (p PKI) PKCS12Truststore(t testing.TB, password string) string {
	t.Helper()
	der, err := pkcs12.Modern2023.EncodeTrustStore([]*x509.Certificate{p.CA}, password)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, "truststore.p12", der)
}

// JKSKeystore writes the client's key and chain as a JKS keystore (store
// password storePW, key password keyPW) and returns its path.
func (p PKI) JKSKeystore(t testing.TB, storePW, keyPW string) string {
	t.Helper()
	pkcs8, err := x509.MarshalPKCS8PrivateKey(p.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	ks := keystore.New()
	entry := keystore.PrivateKeyEntry{
		CreationTime: time.Now(), PrivateKey: pkcs8,
		CertificateChain: []keystore.Certificate{{Type: "X.509", Content: p.Client.Raw}, {Type: "X.509", Content: p.CA.Raw}},
	}
	if err := ks.SetPrivateKeyEntry("kmirror", entry, []byte(keyPW)); err != nil {
		t.Fatal(err)
	}
	return p.writeJKS(t, "client.jks", ks, storePW)
}

// JKSTruststore writes the CA as a JKS trust store and returns its path.
func (p PKI) JKSTruststore(t testing.TB, password string) string {
	t.Helper()
	ks := keystore.New()
	if err := ks.SetTrustedCertificateEntry("ca", keystore.TrustedCertificateEntry{
		CreationTime: time.Now(), Certificate: keystore.Certificate{Type: "X.509", Content: p.CA.Raw},
	}); err != nil {
		t.Fatal(err)
	}
	return p.writeJKS(t, "truststore.jks", ks, password)
}

func (p PKI) writeJKS(t testing.TB, name string, ks keystore.KeyStore, password string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := ks.Store(&buf, []byte(password)); err != nil {
		t.Fatal(err)
	}
	return p.write(t, name, buf.Bytes())
}
