package engine

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// Store types of ssl.keystore.type and ssl.truststore.type.
const (
	storePEM    = "PEM"
	storePKCS12 = "PKCS12"
	storeJKS    = "JKS"
)

// Magic numbers of Java's own store formats.
const (
	jksMagic   = 0xFEEDFEED
	jceksMagic = 0xCECECECE
)

// storeType returns the format of a key or trust store: the one the
// setting names, checked against the file's content, or, when the setting
// is absent, the one the content shows. Kafka's default is JKS, but a
// keystore written by a current keytool is PKCS12 and kmirror has always
// read PEM without the setting, so an absent type is detected, not assumed.
func storeType(setting string, data []byte) (string, error) {
	found := detectStore(data)
	want := strings.ToUpper(strings.TrimSpace(setting))
	switch want {
	case "":
		if found == "" {
			return "", errors.New("neither PEM, PKCS12 nor JKS")
		}
		return found, nil
	case storePEM, storePKCS12, storeJKS:
	default:
		return "", fmt.Errorf("store type %q: want PEM, PKCS12 or JKS", setting)
	}
	if found != want {
		what := found
		if what == "" {
			what = "neither PEM, PKCS12 nor JKS"
		}
		return "", fmt.Errorf("the file is not %s (it is %s)", want, what)
	}
	return want, nil
}

// detectStore names the format of a store's bytes, "" when unknown.
func detectStore(data []byte) string {
	if len(data) >= 4 {
		switch binary.BigEndian.Uint32(data) {
		case jksMagic:
			return storeJKS
		case jceksMagic:
			return "JCEKS (convert it: keytool -importkeystore -deststoretype PKCS12)"
		}
	}
	if bytes.Contains(data, []byte("-----BEGIN ")) {
		return storePEM
	}
	if len(data) > 0 && data[0] == 0x30 { // a DER SEQUENCE: a PKCS#12 PFX
		return storePKCS12
	}
	return ""
}

// keyPair reads the client certificate and key of ssl.keystore.location, as
// ssl.keystore.type says (or its content shows): PEM (ssl.key.password
// decrypts an encrypted key), PKCS12 (ssl.keystore.password; keytool writes
// one password for the store and its key, so ssl.key.password stands in
// only when the store password is unset) or JKS (ssl.keystore.password for
// the store, ssl.key.password for the keys, the store password when unset,
// as Kafka does).
func keyPair(cfg map[string]string) (tls.Certificate, error) {
	path := cfg["ssl.keystore.location"]
	fail := func(err error) (tls.Certificate, error) {
		return tls.Certificate{}, fmt.Errorf("ssl.keystore.location %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fail(err)
	}
	typ, err := storeType(cfg["ssl.keystore.type"], data)
	if err != nil {
		return fail(err)
	}
	storePW, keyPW := cfg["ssl.keystore.password"], cfg["ssl.key.password"]
	var cert tls.Certificate
	switch typ {
	case storePEM:
		cert, err = pemKeyPair(data, keyPW)
		if err != nil {
			err = fmt.Errorf("want a PEM file with certificate and key: %w", err)
		}
	case storePKCS12:
		if storePW == "" {
			storePW = keyPW
		}
		cert, err = pkcs12KeyPair(data, storePW)
	case storeJKS:
		if keyPW == "" {
			keyPW = storePW
		}
		cert, err = jksKeyPair(data, storePW, keyPW)
	}
	if err != nil {
		return fail(err)
	}
	return cert, nil
}

// pkcs12KeyPair reads a PKCS#12 keystore: one private key, its certificate
// and the chain. The leaf is the certificate of the key, wherever the file
// put it.
func pkcs12KeyPair(data []byte, password string) (tls.Certificate, error) {
	key, leaf, chain, err := pkcs12.DecodeChain(data, password)
	if err != nil {
		return tls.Certificate{}, pkcs12Error(err, "ssl.keystore.password")
	}
	return chainWithKey(key, append([]*x509.Certificate{leaf}, chain...))
}

// pkcs12Error says which setting to look at when a PKCS#12 file does not
// open: its integrity check (or, without one, its decryption) fails with a
// wrong password.
func pkcs12Error(err error, setting string) error {
	if wrongPKCS12Password(err) {
		return fmt.Errorf("PKCS12: wrong %s (the store's integrity check failed)", setting)
	}
	return err // "pkcs12: ..."
}

func wrongPKCS12Password(err error) bool {
	return errors.Is(err, pkcs12.ErrIncorrectPassword) || errors.Is(err, pkcs12.ErrDecryption)
}

// jksKeyPair reads the first private key entry (by alias) of a JKS
// keystore with its chain: a client keystore holds one.
func jksKeyPair(data []byte, storePW, keyPW string) (tls.Certificate, error) {
	ks, err := loadJKS(data, storePW, "ssl.keystore.password")
	if err != nil {
		return tls.Certificate{}, err
	}
	aliases := ks.Aliases()
	slices.Sort(aliases)
	for _, alias := range aliases {
		if !ks.IsPrivateKeyEntry(alias) {
			continue
		}
		e, err := ks.GetPrivateKeyEntry(alias, []byte(keyPW))
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("JKS entry %q: cannot decrypt its private key: wrong ssl.key.password", alias)
		}
		key, err := x509.ParsePKCS8PrivateKey(e.PrivateKey)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("JKS entry %q: private key: %w", alias, err)
		}
		certs, err := jksCerts(e.CertificateChain)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("JKS entry %q: %w", alias, err)
		}
		return chainWithKey(key, certs)
	}
	return tls.Certificate{}, errors.New("JKS: no private key entry")
}

// loadJKS opens a JKS store. Its integrity digest covers the password, so
// a wrong one and a damaged file look alike. Java reads a store without a
// password by skipping the check; kmirror insists on the password.
func loadJKS(data []byte, password, setting string) (keystore.KeyStore, error) {
	if password == "" {
		return keystore.KeyStore{}, fmt.Errorf("JKS: %s is not set (kmirror does not read a JKS store unchecked)", setting)
	}
	ks := keystore.New()
	if err := ks.Load(bytes.NewReader(data), []byte(password)); err != nil {
		return keystore.KeyStore{}, fmt.Errorf("JKS: wrong %s or a damaged file (the store's integrity check failed)", setting)
	}
	return ks, nil
}

func jksCerts(chain []keystore.Certificate) ([]*x509.Certificate, error) {
	out := make([]*x509.Certificate, 0, len(chain))
	for _, c := range chain {
		if c.Type != "X.509" && c.Type != "X509" {
			return nil, fmt.Errorf("certificate type %q is not X.509", c.Type)
		}
		cert, err := x509.ParseCertificate(c.Content)
		if err != nil {
			return nil, err
		}
		out = append(out, cert)
	}
	return out, nil
}

// chainWithKey builds the TLS certificate of key: the certificate whose
// public key is key's first, then the rest of the chain in order.
func chainWithKey(key any, certs []*x509.Certificate) (tls.Certificate, error) {
	signer, ok := key.(crypto.Signer)
	if !ok {
		return tls.Certificate{}, fmt.Errorf("private key of type %T cannot sign", key)
	}
	type publicKey interface{ Equal(crypto.PublicKey) bool }
	pub, ok := signer.Public().(publicKey)
	if !ok {
		return tls.Certificate{}, fmt.Errorf("public key of type %T", signer.Public())
	}
	i := slices.IndexFunc(certs, func(c *x509.Certificate) bool { return pub.Equal(c.PublicKey) })
	if i < 0 {
		return tls.Certificate{}, errors.New("no certificate matches the private key")
	}
	out := tls.Certificate{PrivateKey: key, Leaf: certs[i], Certificate: [][]byte{certs[i].Raw}}
	for j, c := range certs {
		if j != i {
			out.Certificate = append(out.Certificate, c.Raw)
		}
	}
	return out, nil
}

// trustPool reads the CA certificates of ssl.truststore.location, as
// ssl.truststore.type says (or its content shows): every certificate of a
// PEM file; the certificates of a PKCS12 store that are marked trusted
// (what keytool -importcert writes and Java's trust manager reads; openssl
// writes the mark with -jdktrust), its password optional; the trusted
// certificate entries of a JKS store.
func trustPool(cfg map[string]string) (*x509.CertPool, error) {
	path := cfg["ssl.truststore.location"]
	fail := func(err error) (*x509.CertPool, error) {
		return nil, fmt.Errorf("ssl.truststore.location %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fail(err)
	}
	typ, err := storeType(cfg["ssl.truststore.type"], data)
	if err != nil {
		return fail(err)
	}
	pool := x509.NewCertPool()
	password := cfg["ssl.truststore.password"]
	switch typ {
	case storePEM:
		if !pool.AppendCertsFromPEM(data) {
			return fail(errors.New("no PEM certificate"))
		}
		return pool, nil
	case storePKCS12:
		certs, err := pkcs12.DecodeTrustStore(data, password)
		if err != nil {
			if wrongPKCS12Password(err) {
				return fail(pkcs12Error(err, "ssl.truststore.password"))
			}
			return fail(fmt.Errorf("%w (a PKCS12 trust store holds only certificates marked trusted: keytool -importcert writes them, openssl pkcs12 -export -nokeys -jdktrust anyExtendedKeyUsage too)", err))
		}
		for _, c := range certs {
			pool.AddCert(c)
		}
		if len(certs) == 0 {
			return fail(errors.New("PKCS12: no trusted certificate"))
		}
		return pool, nil
	default: // JKS
		ks, err := loadJKS(data, password, "ssl.truststore.password")
		if err != nil {
			return fail(err)
		}
		var n int
		for _, alias := range ks.Aliases() {
			e, err := ks.GetTrustedCertificateEntry(alias)
			if err != nil {
				continue // a private key entry: not a trust anchor
			}
			certs, err := jksCerts([]keystore.Certificate{e.Certificate})
			if err != nil {
				return fail(fmt.Errorf("JKS entry %q: %w", alias, err))
			}
			pool.AddCert(certs[0])
			n++
		}
		if n == 0 {
			return fail(errors.New("JKS: no trusted certificate entry"))
		}
		return pool, nil
	}
}
