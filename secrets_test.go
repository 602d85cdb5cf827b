package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// secretEnv names the environment variable that holds the source password
// in these tests.
const secretEnv = "KMIRROR_SOURCE_TEST_SECRET"

// saslSource starts a source cluster that requires SASL with mech and
// returns it with settings for the test's own clients.
func saslSource(t *testing.T, mech, user, pw string) (*enginetest.Cluster, []kgo.Opt) {
	t.Helper()
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.EnableSASL(), kfake.Superuser(mech, user, pw))
	opts, err := engine.SecurityOpts(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech, "sasl.username": user, "sasl.password": pw})
	if err != nil {
		t.Fatal(err)
	}
	return src, opts
}

func randomSecret(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "kmirror-secret-" + hex.EncodeToString(b)
}

func saslMirrorConfig(src *enginetest.Cluster, mech, user, password string) string {
	return strings.Join([]string{
		"bootstrap.servers=" + addrs(src),
		"security.protocol=SASL_PLAINTEXT",
		"sasl.mechanism=" + mech,
		"sasl.username=" + user,
		"sasl.password=" + password,
	}, "\n")
}

// readStateRaw returns every key and value in __mirror_state as stored,
// without decoding, so nothing kmirror's decoder drops can hide a secret.
func readStateRaw(t *testing.T, dst *enginetest.Cluster) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(dst.Client(t))
	ends, err := adm.ListEndOffsets(ctx, store.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", store.Topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl := dst.Client(t, kgo.ConsumeTopics(store.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var raw bytes.Buffer
	records := 0
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d partitions unread after %d records", store.Topic, len(want), records)
		}
		fs.EachRecord(func(r *kgo.Record) {
			records++
			raw.Write(r.Key)
			raw.WriteByte('=')
			raw.Write(r.Value)
			raw.WriteByte('\n')
			if r.Offset >= want[r.Partition]-1 {
				delete(want, r.Partition)
			}
		})
	}
	if records == 0 {
		t.Fatalf("%s is empty", store.Topic)
	}
	return raw.Bytes()
}

// TestSecretsNeverLeak mirrors from a SCRAM source whose password comes
// from ${env:...}, then looks for the password everywhere kmirror writes:
// __mirror_state read raw, --describe (text, --failed, --json), --list,
// the CLI's own output and the instance's stdout and log.
func TestSecretsNeverLeak(t *testing.T) {
	const mech, user = "SCRAM-SHA-256", "mirror"
	pw := randomSecret(t)
	t.Setenv(secretEnv, pw) // the instance subprocess inherits it
	src, srcOpts := saslSource(t, mech, user, pw)
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	srcCl := src.Client(t, srcOpts...)
	if resp, err := kadm.NewClient(srcCl).CreateTopic(context.Background(), 2, -1, nil, "orders"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	enginetest.Produce(t, src.Client(t, append(slices.Clone(srcOpts), enginetest.ProducerOpts("zstd", true)...)...), "orders", 2, 80, "s")

	work := t.TempDir()
	cfg := filepath.Join(work, "m.properties")
	if err := writeFile(cfg, saslMirrorConfig(src, mech, user, "${env:"+secretEnv+"}")); err != nil {
		t.Fatal(err)
	}
	var cliOut strings.Builder
	B := addrs(dst)
	cliOut.WriteString(kmirrorCLI(t, 0, "--bootstrap-server", B, "--create", "--mirror", "a-to-b", "--mirror-config", cfg))
	cliOut.WriteString(kmirrorCLI(t, 0, "--bootstrap-server", B, "--start", "--mirror", "a-to-b", "--topics", "orders"))
	inst := startRun(t, dst, "secret-instance", work)
	dstCl := dst.Client(t)
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		se, err1 := enginetest.Ends(context.Background(), srcCl, "orders")
		de, err2 := enginetest.Ends(context.Background(), dstCl, "orders")
		return err1 == nil && err2 == nil && slices.Equal(se, de), fmt.Sprintf("source %v destination %v (%v %v)", se, de, err1, err2)
	})
	for p := range int32(2) {
		if _, err := enginetest.CompareBatches(context.Background(), srcCl, dstCl, "orders", p); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"--describe"}, {"--describe", "--failed"}, {"--describe", "--json"}, {"--describe", "--mirror", "a-to-b", "--json"}, {"--list"}} {
		cliOut.WriteString(kmirrorCLI(t, 0, append([]string{"--bootstrap-server", B}, args...)...))
	}
	// A graceful stop lets the instance log its shutdown too.
	stopGracefully(t, inst)

	state := readStateRaw(t, dst)
	if !bytes.Contains(state, []byte("${env:"+secretEnv+"}")) {
		t.Errorf("%s does not hold the reference ${env:%s}; did the test read the mirror definition?\n%s", store.Topic, secretEnv, state)
	}
	logs, _ := os.ReadFile(inst.stderr)
	stdout, _ := os.ReadFile(inst.stdout)
	if len(logs) == 0 {
		t.Error("the instance logged nothing; the log check would prove nothing")
	}
	for where, text := range map[string][]byte{
		store.Topic + " (raw)": state, "CLI output": []byte(cliOut.String()),
		"instance log": logs, "instance stdout": stdout,
	} {
		if bytes.Contains(text, []byte(pw)) {
			t.Errorf("the source password appears in %s", where)
		}
	}
}

// stopGracefully sends SIGTERM and waits for the instance to exit, killing
// it if it does not within a deadline.
func stopGracefully(t *testing.T, p *runProc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("instance exit after SIGTERM: %v", err)
		}
	case <-timer.C:
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-done
		t.Error("instance did not stop within 30s of SIGTERM")
	}
}

// TestSecretLiteralRefused: --create refuses a literal password (without
// echoing it) and records nothing, unless --allow-plaintext-secrets.
func TestSecretLiteralRefused(t *testing.T) {
	const mech, user = "PLAIN", "mirror"
	pw := randomSecret(t)
	src, _ := saslSource(t, mech, user, pw)
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	work := t.TempDir()
	cfg := filepath.Join(work, "literal.properties")
	if err := writeFile(cfg, saslMirrorConfig(src, mech, user, pw)); err != nil {
		t.Fatal(err)
	}
	B := addrs(dst)
	out := kmirrorCLI(t, 1, "--bootstrap-server", B, "--create", "--mirror", "literal", "--mirror-config", cfg)
	if !strings.Contains(out, "sasl.password") || !strings.Contains(out, "--allow-plaintext-secrets") {
		t.Errorf("refusal does not name the setting and the flag: %q", out)
	}
	if strings.Contains(out, pw) {
		t.Errorf("refusal echoes the password: %q", out)
	}
	if list := kmirrorCLI(t, 0, "--bootstrap-server", B, "--list"); strings.Contains(list, "literal") {
		t.Errorf("a refused mirror was recorded:\n%s", list)
	}
	// The operator's explicit choice is honoured, and still not printed.
	out = kmirrorCLI(t, 0, "--bootstrap-server", B, "--create", "--mirror", "literal", "--mirror-config", cfg, "--allow-plaintext-secrets")
	out += kmirrorCLI(t, 0, "--bootstrap-server", B, "--list")
	if !strings.Contains(out, "literal") || strings.Contains(out, pw) {
		t.Errorf("with --allow-plaintext-secrets: %q", out)
	}
}

// TestSASLWrongPasswordFailsCreate: a mirror whose source password is wrong
// is refused at --create with exit 1 and one line naming the source, fast
// (no retry loop until a timeout), for PLAIN and SCRAM-SHA-256.
func TestSASLWrongPasswordFailsCreate(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		t.Run(mech, func(t *testing.T) {
			src, _ := saslSource(t, mech, "mirror", "the-right-password")
			dst := enginetest.NewCluster(t, "kmirror-test-destination")
			wrong := randomSecret(t)
			t.Setenv(secretEnv, wrong)
			cfg := filepath.Join(t.TempDir(), "m.properties")
			if err := writeFile(cfg, saslMirrorConfig(src, mech, "mirror", "${env:"+secretEnv+"}")); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			start := time.Now()
			code := run([]string{"--bootstrap-server", addrs(dst), "--create", "--mirror", "a-to-b", "--mirror-config", cfg}, &out, &errb)
			took := time.Since(start)
			msg := errb.String()
			t.Logf("exit %d after %s: %s", code, took.Round(time.Millisecond), msg)
			if code != exitFail {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, exitFail, out.String(), msg)
			}
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "kmirror: ") {
				t.Errorf("want one line starting with \"kmirror: \", got %q", msg)
			}
			if !strings.Contains(msg, strings.Split(addrs(src), ",")[0]) {
				t.Errorf("the error does not name the source cluster: %q", msg)
			}
			// The wording is not checked: kfake closes the connection on a
			// failed SASL exchange where Kafka answers
			// SASL_AUTHENTICATION_FAILED, so here the cause reads "EOF".
			if strings.Contains(msg, wrong) {
				t.Errorf("the error echoes the password: %q", msg)
			}
			if took > 15*time.Second {
				t.Errorf("took %s; a wrong password should fail fast", took)
			}
		})
	}
}

// TestDefinitionOutsideSecretPolicy: a definition whose source settings
// reference a variable or a file outside the instance's policy (by
// default KMIRROR_SOURCE_* and /etc/kmirror/secrets) is refused by
// --create, naming the reference and the setting that would allow it; the
// same definitions written straight to __mirror_state make an instance
// fail those mirrors, naming the reference, while another mirror goes on.
// Neither value appears in the CLI's output, the instance's log,
// --describe or __mirror_state.
func TestDefinitionOutsideSecretPolicy(t *testing.T) {
	destPW, filePW := randomSecret(t), randomSecret(t)
	t.Setenv("KMIRROR_DESTINATION_PASSWORD", destPW) // the instance subprocess inherits it
	work := t.TempDir()
	secrets := filepath.Join(work, "secrets.properties")
	if err := writeFile(secrets, "pw="+filePW); err != nil {
		t.Fatal(err)
	}
	src := enginetest.NewCluster(t, "kmirror-test-source")
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	srcCl, dstCl := src.Client(t), dst.Client(t)
	src.CreateTopic(t, "ok", 1, nil)
	enginetest.Produce(t, srcCl, "ok", 1, 20, "x")
	B := addrs(dst)
	refs := map[string]struct{ ref, setting string }{
		"evil-env":  {"${env:KMIRROR_DESTINATION_PASSWORD}", "KMIRROR_CONFIG_PROVIDER_ALLOWED_ENV"},
		"evil-file": {"${file:" + secrets + ":pw}", "KMIRROR_CONFIG_PROVIDER_ALLOWED_PATHS"},
	}
	var cliOut strings.Builder
	for name, r := range refs {
		cfg := filepath.Join(work, name+".properties")
		if err := writeFile(cfg, saslMirrorConfig(src, "PLAIN", "u", r.ref)); err != nil {
			t.Fatal(err)
		}
		out := kmirrorCLI(t, 1, "--bootstrap-server", B, "--create", "--mirror", name, "--mirror-config", cfg)
		cliOut.WriteString(out)
		if !strings.Contains(out, r.ref) || !strings.Contains(out, r.setting) {
			t.Errorf("--create of %s: %q does not name %s and %s", name, out, r.ref, r.setting)
		}
	}
	good := filepath.Join(work, "good.properties")
	if err := writeFile(good, "bootstrap.servers="+addrs(src)); err != nil {
		t.Fatal(err)
	}
	cliOut.WriteString(kmirrorCLI(t, 0, "--bootstrap-server", B, "--create", "--mirror", "good", "--mirror-config", good))
	cliOut.WriteString(kmirrorCLI(t, 0, "--bootstrap-server", B, "--start", "--mirror", "good", "--topics", "ok"))
	if list := kmirrorCLI(t, 0, "--bootstrap-server", B, "--list"); strings.Contains(list, "evil") {
		t.Fatalf("a refused mirror was recorded:\n%s", list)
	}

	// Someone who may write __mirror_state writes the definitions anyway.
	w := store.NewWriter(dst.Client(t, store.WriterOpts()...))
	ctx := context.Background()
	for name, r := range refs {
		def := store.MirrorDef{Name: name, SourceBootstrap: src.Addrs(), SourceConfig: map[string]string{
			"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": r.ref,
		}}
		if err := w.PutMirror(ctx, def); err != nil {
			t.Fatal(err)
		}
		if err := w.PutTopic(ctx, store.TopicDesired{Mirror: name, Topic: "ok", Desired: partition.DesiredStart}); err != nil {
			t.Fatal(err)
		}
	}
	inst := startRun(t, dst, "policy-instance", work)
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		se, err1 := enginetest.Ends(ctx, srcCl, "ok")
		de, err2 := enginetest.Ends(ctx, dstCl, "ok")
		logs, _ := os.ReadFile(inst.stderr)
		for name, r := range refs {
			if !bytes.Contains(logs, []byte(name)) || !bytes.Contains(logs, []byte(r.ref)) || !bytes.Contains(logs, []byte(r.setting)) {
				return false, fmt.Sprintf("the instance's log does not name mirror %s, %s and %s yet", name, r.ref, r.setting)
			}
		}
		return err1 == nil && err2 == nil && slices.Equal(se, de), fmt.Sprintf("good mirror: source %v destination %v (%v %v)", se, de, err1, err2)
	})
	for _, args := range [][]string{{"--describe"}, {"--describe", "--json"}, {"--describe-config", "--mirror", "evil-env"}, {"--list"}} {
		cliOut.WriteString(kmirrorCLI(t, 0, append([]string{"--bootstrap-server", B}, args...)...))
	}
	stopGracefully(t, inst)
	logs, _ := os.ReadFile(inst.stderr)
	stdout, _ := os.ReadFile(inst.stdout)
	for where, text := range map[string][]byte{
		store.Topic + " (raw)": readStateRaw(t, dst), "CLI output": []byte(cliOut.String()),
		"instance log": logs, "instance stdout": stdout,
	} {
		for what, secret := range map[string]string{"destination password": destPW, "secret file's value": filePW} {
			if bytes.Contains(text, []byte(secret)) {
				t.Errorf("the %s appears in %s", what, where)
			}
		}
	}
}
