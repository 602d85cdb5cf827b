package engine_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/props"
)

// mutualPKI is a throwaway CA, a broker certificate for 127.0.0.1 and a
// client certificate, with broker TLS settings that require a client
// certificate signed by the CA.
type mutualPKI struct {
	enginetest.PKI
	caFile   string      // the CA, PEM (ssl.truststore.location)
	keystore string      // the client's certificate and key, PEM (ssl.keystore.location)
	server   *tls.Config // requires and verifies client certificates
}

func newMutualPKI(t *testing.T) mutualPKI {
	p := enginetest.NewPKI(t)
	return mutualPKI{PKI: p, caFile: p.CAFile, keystore: p.PEMKeys, server: p.Server}
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

// Environment variables holding the store passwords of the source in
// TestSecurityKeystoreFormats; its mirror configuration names them.
const (
	storePasswordEnv = "KMIRROR_SOURCE_TEST_STORE_PASSWORD"
	keyPasswordEnv   = "KMIRROR_SOURCE_TEST_KEY_PASSWORD"
)

// storeSettings are the client settings of a PKCS12 or JKS keystore and
// trust store of p, their passwords as given. A JKS key gets a password of
// its own (ssl.key.password); keytool writes one password for a PKCS12
// store and its key.
func storeSettings(t *testing.T, p mutualPKI, typ, storePW, keyPW string) map[string]string {
	cfg := map[string]string{
		"security.protocol": "SSL", "ssl.keystore.type": typ, "ssl.truststore.type": typ,
		"ssl.keystore.password": storePW, "ssl.truststore.password": storePW,
	}
	switch typ {
	case "PKCS12":
		cfg["ssl.keystore.location"] = p.PKCS12Keystore(t, storePW)
		cfg["ssl.truststore.location"] = p.PKCS12Truststore(t, storePW)
	case "JKS":
		cfg["ssl.keystore.location"] = p.JKSKeystore(t, storePW, keyPW)
		cfg["ssl.truststore.location"] = p.JKSTruststore(t, storePW)
		cfg["ssl.key.password"] = keyPW
	}
	return cfg
}

// TestSecurityKeystoreFormats: both clusters require a client certificate
// and every store is a PKCS12 or a JKS file (no PEM anywhere): the source's
// in the mirror configuration with its passwords as references, the
// destination's as --command-config gives them. The mirror runs end to end
// and stays identical. A wrong password is refused before any connection,
// naming the setting to fix.
func TestSecurityKeystoreFormats(t *testing.T) {
	for _, typ := range []string{"PKCS12", "JKS"} {
		t.Run(typ, func(t *testing.T) {
			const storePW, keyPW = "store-pw-3a9c", "key-pw-71d0"
			t.Setenv(storePasswordEnv, storePW)
			t.Setenv(keyPasswordEnv, keyPW)
			srcPKI, dstPKI := newMutualPKI(t), newMutualPKI(t)
			srcSettings := storeSettings(t, srcPKI, typ, storePW, keyPW)
			dstSettings := storeSettings(t, dstPKI, typ, storePW, keyPW)
			src := newSecuredSide(t, "kmirror-test-source", srcSettings, kfake.TLS(srcPKI.server))
			dst := newSecuredSide(t, "kmirror-test-destination", dstSettings, kfake.TLS(dstPKI.server))

			for _, setting := range []string{"ssl.keystore.password", "ssl.truststore.password", "ssl.key.password"} {
				if _, ok := dstSettings[setting]; !ok {
					continue
				}
				wrong := maps.Clone(dstSettings)
				wrong[setting] = "not-the-password"
				if setting == "ssl.keystore.password" && typ == "JKS" {
					wrong["ssl.key.password"] = keyPW // the store password alone is wrong
				}
				_, err := engine.SecurityOpts(wrong)
				if err == nil || !strings.Contains(err.Error(), "wrong "+setting) || strings.Contains(err.Error(), "\n") {
					t.Errorf("wrong %s: %v; want one line saying so", setting, err)
				}
			}

			srcConfig := maps.Clone(srcSettings)
			srcConfig["ssl.keystore.password"] = "${env:" + storePasswordEnv + "}"
			srcConfig["ssl.truststore.password"] = "${env:" + storePasswordEnv + "}"
			if typ == "JKS" {
				srcConfig["ssl.key.password"] = "${env:" + keyPasswordEnv + "}"
			}
			mirrorThrough(t, src, srcConfig, dst)
		})
	}
}

// TestSecurityStoreChecks: a store whose type is not set is read by its
// content; a type that does not match the file, a JKS trust store without
// its password, a PKCS12 keystore given as a trust store and a JKS key
// whose password differs from the store's without ssl.key.password are
// refused, saying why; a PKCS12 keystore in the legacy
// encoding (3DES and SHA-1, what older keytool and openssl versions wrote)
// reads like a current one.
func TestSecurityStoreChecks(t *testing.T) {
	p := newMutualPKI(t)
	const pw = "checks-pw-5e2d"
	legacy, err := pkcs12.LegacyDES.Encode(p.ClientKey, p.Client, []*x509.Certificate{p.CA}, pw)
	if err != nil {
		t.Fatal(err)
	}
	legacyFile := filepath.Join(t.TempDir(), "legacy.p12")
	if err := os.WriteFile(legacyFile, legacy, 0o600); err != nil {
		t.Fatal(err)
	}
	untrusted, err := pkcs12.Modern2023.Encode(p.ClientKey, p.Client, nil, pw)
	if err != nil {
		t.Fatal(err)
	}
	untrustedFile := filepath.Join(t.TempDir(), "untrusted.p12")
	if err := os.WriteFile(untrustedFile, untrusted, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := []map[string]string{
		{"ssl.keystore.location": p.PKCS12Keystore(t, pw), "ssl.keystore.password": pw, "ssl.truststore.location": p.JKSTruststore(t, pw), "ssl.truststore.password": pw},
		{"ssl.keystore.location": p.JKSKeystore(t, pw, pw), "ssl.keystore.password": pw, "ssl.truststore.location": p.PKCS12Truststore(t, "")},
		{"ssl.keystore.location": legacyFile, "ssl.keystore.type": "pkcs12", "ssl.keystore.password": pw},
		{"ssl.keystore.location": p.PEMKeys, "ssl.truststore.location": p.CAFile, "ssl.truststore.type": "PEM"},
	}
	for _, cfg := range ok {
		cfg["security.protocol"] = "SSL"
		if _, err := engine.SecurityOpts(cfg); err != nil {
			t.Errorf("%v: %v", cfg, err)
		}
	}
	for _, tt := range []struct {
		cfg  map[string]string
		want string
	}{
		{map[string]string{"ssl.keystore.location": p.JKSKeystore(t, pw, pw), "ssl.keystore.type": "PKCS12", "ssl.keystore.password": pw}, "is not PKCS12 (it is JKS)"},
		{map[string]string{"ssl.truststore.location": p.CAFile, "ssl.truststore.type": "JKS"}, "is not JKS (it is PEM)"},
		{map[string]string{"ssl.truststore.location": p.JKSTruststore(t, pw)}, "ssl.truststore.password is not set"},
		{map[string]string{"ssl.truststore.location": untrustedFile, "ssl.truststore.password": pw}, "marked trusted"},
		{map[string]string{"ssl.keystore.location": p.JKSKeystore(t, pw, "other-key-pw"), "ssl.keystore.password": pw}, "wrong ssl.key.password"},
	} {
		tt.cfg["security.protocol"] = "SSL"
		_, err := engine.SecurityOpts(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want an error saying %q", tt.cfg, err, tt.want)
		}
	}
}
