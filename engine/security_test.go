package engine_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/props"
)

// sourcePasswordEnv holds the source password in these tests; mirror
// configurations name it, never the value.
const sourcePasswordEnv = "KMIRROR_SOURCE_TEST_PASSWORD"

// securedSide is one cluster with the settings a kmirror client needs to
// reach it.
type securedSide struct {
	c        *enginetest.Cluster
	settings map[string]string // resolved security settings
	opts     []kgo.Opt
}

func newSecuredSide(t *testing.T, id string, settings map[string]string, kopts ...kfake.Opt) securedSide {
	t.Helper()
	opts, err := engine.SecurityOpts(settings)
	if err != nil {
		t.Fatalf("security settings of %s: %v", id, err)
	}
	return securedSide{c: enginetest.NewCluster(t, id, kopts...), settings: settings, opts: opts}
}

func (s securedSide) client(t *testing.T, extra ...kgo.Opt) *kgo.Client {
	return s.c.Client(t, append(slices.Clone(s.opts), extra...)...)
}

// mirrorThrough creates mirror a-to-b on dst from a configuration whose
// source settings are srcConfig (secrets as references), starts topic
// "secure" (2 partitions, zstd and lz4 data), runs an instance and requires
// identical batches on both sides.
func mirrorThrough(t *testing.T, src securedSide, srcConfig map[string]string, dst securedSide) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srcCl := src.client(t)
	if resp, err := kadm.NewClient(srcCl).CreateTopic(ctx, 2, -1, nil, "secure"); err != nil || resp.Err != nil {
		t.Fatalf("create source topic: %v %v", err, resp.Err)
	}
	enginetest.Produce(t, src.client(t, enginetest.ProducerOpts("zstd", true)...), "secure", 2, 150, "zstd")
	enginetest.Produce(t, src.client(t, enginetest.ProducerOpts("lz4", false)...), "secure", 2, 70, "lz4")

	eng := runSecuredMirror(t, ctx, src, srcConfig, dst, "secure", "secured")
	dstCl := dst.client(t)
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		se, err1 := enginetest.Ends(ctx, srcCl, "secure")
		de, err2 := enginetest.Ends(ctx, dstCl, "secure")
		var st []string
		for _, m := range eng.Snapshot().Mirrors {
			for _, p := range m.Partitions {
				st = append(st, fmt.Sprintf("%d:%s %q", p.Partition, p.State, p.Error))
			}
		}
		return err1 == nil && err2 == nil && slices.Equal(se, de), fmt.Sprintf("source %v destination %v (%v %v); partitions %v", se, de, err1, err2, st)
	})
	for p := range int32(2) {
		n, err := enginetest.CompareBatches(ctx, srcCl, dstCl, "secure", p)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("secure/%d: no batch compared", p)
		}
	}
	for _, m := range eng.Snapshot().Mirrors {
		for _, p := range m.Partitions {
			if p.State != partition.Mirroring {
				t.Errorf("%s/%d is %s: %s", p.Topic, p.Partition, p.State, p.Error)
			}
		}
	}
}

// runSecuredMirror creates mirror a-to-b on dst from a configuration whose
// source settings are srcConfig (secrets as references), starts topic and
// runs an instance named instance with dst's settings, as kmirror run with
// --command-config would.
func runSecuredMirror(t *testing.T, ctx context.Context, src securedSide, srcConfig map[string]string, dst securedSide, topic, instance string) *engine.Engine {
	t.Helper()
	adm, err := engine.NewAdmin(ctx, dst.c.Addrs(), dst.settings, 30*time.Second)
	if err != nil {
		t.Fatalf("admin on the destination: %v", err)
	}
	defer adm.Close()
	cfg := map[string]string{"bootstrap.servers": strings.Join(src.c.Addrs(), ","), "mirror.failed.retry.initial.backoff.ms": "50"}
	maps.Copy(cfg, srcConfig)
	if _, err := adm.CreateMirror(ctx, "a-to-b", props.FromMap(cfg), false); err != nil {
		t.Fatalf("create mirror: %v", err)
	}
	sel, err := engine.ParseTopics(topic)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Start(ctx, "a-to-b", sel, nil); err != nil {
		t.Fatalf("start: %v", err)
	}
	tc, mech, err := engine.SecurityParts(dst.settings)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, engine.Config{Destination: dst.c.Addrs(), DestinationOpts: dst.opts, DestinationTLS: tc, DestinationSASL: mech, Instance: instance})
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	t.Cleanup(eng.Close)
	if err := eng.Join(ctx); err != nil {
		t.Fatalf("join: %v", err)
	}
	return eng
}

// TestSecuritySASLSource mirrors from a source that requires SASL (PLAIN and
// SCRAM-SHA-256) into a plaintext destination, the mirror's password coming
// from the environment.
func TestSecuritySASLSource(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		t.Run(mech, func(t *testing.T) {
			const user, pw = "mirror", "sasl-source-pw-8f3e"
			t.Setenv(sourcePasswordEnv, pw)
			settings := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech, "sasl.username": user, "sasl.password": pw}
			src := newSecuredSide(t, "kmirror-test-source", settings, kfake.EnableSASL(), kfake.Superuser(mech, user, pw))
			dst := newSecuredSide(t, "kmirror-test-destination", nil)
			mirrorThrough(t, src, map[string]string{
				"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
				"sasl.username": user, "sasl.password": "${env:" + sourcePasswordEnv + "}",
			}, dst)
		})
	}
}

// TestSecuritySASLSourceJAAS gives the source credentials as a
// sasl.jaas.config line whose password is a reference.
func TestSecuritySASLSourceJAAS(t *testing.T) {
	const user, pw = "mirror", "jaas-pw-1c9a"
	t.Setenv(sourcePasswordEnv, pw)
	settings := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": pw}
	src := newSecuredSide(t, "kmirror-test-source", settings, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", user, pw))
	dst := newSecuredSide(t, "kmirror-test-destination", nil)
	mirrorThrough(t, src, map[string]string{
		"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
		"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="${env:` + sourcePasswordEnv + `}";`,
	}, dst)
}

// TestSecurityTLSSource mirrors from a TLS-only source (SSL, and SASL_SSL
// with SCRAM-SHA-256) whose certificate is checked against a PEM trust
// store.
func TestSecurityTLSSource(t *testing.T) {
	pki := newTestPKI(t)
	t.Run("SSL", func(t *testing.T) {
		settings := map[string]string{"security.protocol": "SSL", "ssl.truststore.location": pki.caFile}
		src := newSecuredSide(t, "kmirror-test-source", settings, kfake.TLS(pki.server))
		dst := newSecuredSide(t, "kmirror-test-destination", nil)
		mirrorThrough(t, src, settings, dst)
	})
	t.Run("SASL_SSL", func(t *testing.T) {
		const user, pw = "mirror", "tls-sasl-pw-77b2"
		t.Setenv(sourcePasswordEnv, pw)
		settings := map[string]string{"security.protocol": "SASL_SSL", "ssl.truststore.location": pki.caFile,
			"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": pw}
		src := newSecuredSide(t, "kmirror-test-source", settings, kfake.TLS(pki.server), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", user, pw))
		dst := newSecuredSide(t, "kmirror-test-destination", nil)
		mirrorThrough(t, src, map[string]string{"security.protocol": "SASL_SSL", "ssl.truststore.location": pki.caFile,
			"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": "${env:" + sourcePasswordEnv + "}"}, dst)
	})
}

// TestSecurityTLSUntrustedSource: a source whose certificate the trust
// store does not vouch for is refused at create, quickly.
func TestSecurityTLSUntrustedSource(t *testing.T) {
	pki, other := newTestPKI(t), newTestPKI(t)
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.TLS(pki.server))
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	ctx := context.Background()
	adm, err := engine.NewAdmin(ctx, dst.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	start := time.Now()
	_, err = adm.CreateMirror(ctx, "a-to-b", props.FromMap(map[string]string{
		"bootstrap.servers": strings.Join(src.Addrs(), ","), "security.protocol": "SSL", "ssl.truststore.location": other.caFile,
	}), false)
	if err == nil {
		t.Fatal("create against an untrusted source certificate succeeded")
	}
	took := time.Since(start)
	t.Logf("refused after %s: %v", took.Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), "certificate") || took > 10*time.Second {
		t.Fatalf("after %s: %v; want a prompt error about the certificate", took, err)
	}
}

// TestSecuritySASLDestination secures the destination with SASL PLAIN
// (settings as --command-config gives them) and mirrors a plaintext source
// into it: the admin actions, the instance's state consumer and the append
// path all authenticate.
func TestSecuritySASLDestination(t *testing.T) {
	const user, pw = "kmirror", "dest-pw-5d1e"
	settings := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": pw}
	src := newSecuredSide(t, "kmirror-test-source", nil)
	dst := newSecuredSide(t, "kmirror-test-destination", settings, kfake.EnableSASL(), kfake.Superuser("PLAIN", user, pw))
	mirrorThrough(t, src, nil, dst)
}

// TestSecurityOptsRejects: settings kmirror cannot honour fail with a
// message naming the setting.
func TestSecurityOptsRejects(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  map[string]string
		want string
	}{
		{"protocol", map[string]string{"security.protocol": "KERBEROS"}, "security.protocol"},
		{"mechanism", map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.username": "u"}, "sasl.mechanism"},
		{"no user", map[string]string{"security.protocol": "SASL_SSL"}, "sasl.username"},
		{"truststore missing", map[string]string{"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem"}, "ssl.truststore.location"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engine.SecurityOpts(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("SecurityOpts(%v) = %v, want an error naming %s", tt.cfg, err, tt.want)
			}
		})
	}
}

// testPKI is a throwaway CA and a server certificate for 127.0.0.1.
type testPKI struct {
	caFile string
	server *tls.Config
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	p := enginetest.NewPKI(t)
	return testPKI{caFile: p.CAFile, server: p.ServerOnly}
}
