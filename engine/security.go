package engine

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SecurityOpts turns Kafka client security settings (security.protocol,
// sasl.*, ssl.*) into franz-go options. Secret values must already be
// resolved. Trust and key stores may be PEM, PKCS12 or JKS files.
func SecurityOpts(cfg map[string]string) ([]kgo.Opt, error) {
	tc, mech, err := SecurityParts(cfg)
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// SecurityParts returns the TLS configuration and SASL mechanism (nil when
// not used) of Kafka client security settings: franz-go clients and
// kmirror's own produce connections use the same ones.
func SecurityParts(cfg map[string]string) (*tls.Config, sasl.Mechanism, error) {
	proto := strings.ToUpper(cfg["security.protocol"])
	if proto == "" {
		proto = "PLAINTEXT"
	}
	var tc *tls.Config
	switch proto {
	case "PLAINTEXT", "SASL_PLAINTEXT":
	case "SSL", "SASL_SSL":
		var err error
		if tc, err = tlsConfig(cfg); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto)
	}
	if !strings.HasPrefix(proto, "SASL") {
		return tc, nil, nil
	}
	switch strings.ToUpper(cfg["sasl.mechanism"]) {
	case "OAUTHBEARER":
		mech, err := oauthMechanism(cfg)
		return tc, mech, err
	case "AWS_MSK_IAM":
		return tc, awsMechanism(os.LookupEnv), nil
	}
	user, pass, err := saslCredentials(cfg)
	if err != nil {
		return nil, nil, err
	}
	switch mech := strings.ToUpper(cfg["sasl.mechanism"]); mech {
	case "", "PLAIN":
		return tc, plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return tc, scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return tc, scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	default:
		return nil, nil, fmt.Errorf("sasl.mechanism %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM", mech)
	}
}

// saslCredentials reads sasl.username/sasl.password, or the username and
// password of a sasl.jaas.config.
func saslCredentials(cfg map[string]string) (string, string, error) {
	user, pass := cfg["sasl.username"], cfg["sasl.password"]
	if jaas := cfg["sasl.jaas.config"]; jaas != "" {
		user, pass = jaasField(jaas, "username"), jaasField(jaas, "password")
	}
	if user == "" {
		return "", "", fmt.Errorf("SASL needs sasl.username and sasl.password, or sasl.jaas.config with username and password")
	}
	return user, pass, nil
}

// jaasField extracts name="value" (or an unquoted value) from a JAAS
// configuration line. Kafka's parser allows spaces around "=" and needs the
// option to be a whole word: "xusername=" is not "username=".
func jaasField(jaas, name string) string {
	re := regexp.MustCompile(`(?:^|[\s;])` + regexp.QuoteMeta(name) + `\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))`)
	m := re.FindStringSubmatch(jaas)
	if m == nil {
		return ""
	}
	if m[1] != "" {
		return strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[1])
	}
	return m[2]
}

func tlsConfig(cfg map[string]string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg["ssl.truststore.location"] != "" {
		pool, err := trustPool(cfg)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if cfg["ssl.keystore.location"] != "" {
		cert, err := keyPair(cfg)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if alg, ok := cfg["ssl.endpoint.identification.algorithm"]; ok && alg == "" {
		// The operator turned hostname verification off: the chain is
		// still verified against the trust store, only the name is not.
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("tls: broker sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: tc.RootCAs, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return tc, nil
}
