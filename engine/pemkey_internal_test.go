package engine

import (
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fixtures under testdata/keystore were written by OpenSSL 3: one
// self-signed certificate and its key encrypted with the password s3cret as
// PKCS#8 (PBES2, PBKDF2-HMAC-SHA256, AES-256-CBC: key.pem; PBKDF2-HMAC-SHA1,
// DES-EDE3-CBC: des3.pem) and in OpenSSL's legacy form (AES-128-CBC,
// legacy.pem).
func TestEncryptedKeystores(t *testing.T) {
	cert, err := os.ReadFile("testdata/keystore/cert.pem")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keystore := func(keyFile string) string {
		key, err := os.ReadFile(filepath.Join("testdata/keystore", keyFile))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, keyFile)
		if err := os.WriteFile(path, append(append([]byte{}, cert...), key...), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, f := range []string{"key.pem", "des3.pem", "legacy.pem"} {
		ks := keystore(f)
		c, err := keyPair(map[string]string{"ssl.keystore.location": ks, "ssl.key.password": "s3cret"})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if !c.PrivateKey.(*ecdsa.PrivateKey).PublicKey.Equal(leaf.PublicKey) {
			t.Errorf("%s: the key does not match the certificate", f)
		}
		if _, err := keyPair(map[string]string{"ssl.keystore.location": ks, "ssl.key.password": "wrong"}); err == nil || !strings.Contains(err.Error(), "ssl.key.password") {
			t.Errorf("%s with a wrong password: %v", f, err)
		}
		if _, err := keyPair(map[string]string{"ssl.keystore.location": ks}); err == nil || !strings.Contains(err.Error(), "set ssl.key.password") {
			t.Errorf("%s without a password: %v", f, err)
		}
		// Through the settings, as a mirror configuration gives them.
		if _, err := tlsConfig(map[string]string{"ssl.keystore.location": ks, "ssl.key.password": "s3cret"}); err != nil {
			t.Errorf("%s via tlsConfig: %v", f, err)
		}
	}
	if _, err := decryptPKCS8([]byte{0x30, 0x00}, "x"); err == nil || errors.Is(err, errKeyPassword) {
		t.Errorf("garbage: %v", err)
	}
}
