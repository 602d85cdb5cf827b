package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/props"
)

// guardedDestination is a SASL destination with an authorizer on which
// kmirror's principal is a super user and "app" may write to topic orders.
func guardedDestination(t *testing.T) (dst securedSide, app *kgo.Client) {
	t.Helper()
	const user, pw, appPW = "kmirror", "dest-pw-7a2c", "app-pw-41f0"
	settings := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": pw}
	dst = newSecuredSide(t, "kmirror-test-destination", settings,
		kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", user, pw),
		kfake.User("PLAIN", "app", appPW,
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "orders", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationWrite, Allow: true},
			kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "orders", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Allow: true}))
	appOpts, err := engine.SecurityOpts(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "app", "sasl.password": appPW})
	if err != nil {
		t.Fatal(err)
	}
	app = dst.c.Client(t, append(appOpts, kgo.DisableIdempotentWrite(), kgo.RecordRetries(0), kgo.RequestRetries(0))...)
	return dst, app
}

// guardACLs lists the DENY WRITE ACLs for User:* on topic.
func guardACLs(t *testing.T, adm *kadm.Client, topic string) []string {
	t.Helper()
	b := kadm.NewACLs().Topics(topic).ResourcePatternType(kadm.ACLPatternLiteral).Deny("User:*").DenyHosts().Operations(kadm.OpWrite)
	res, err := adm.DescribeACLs(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, d := range r.Described {
			out = append(out, fmt.Sprintf("%s %s %s %s %s", d.Permission, d.Name, d.Principal, d.Host, d.Operation))
		}
	}
	return out
}

// appWrite writes one record to orders/p as the app principal.
func appWrite(app *kgo.Client, p int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return app.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: []byte("from app")}).FirstErr()
}

// With mirror.destination.write.guard=acl another principal cannot write to
// a mirrored topic (the broker refuses it); once --stop has made every
// partition STOPPED it can, and the guard's ACL is gone.
func TestWriteGuardKeepsOthersOutUntilStopped(t *testing.T) {
	ctx := context.Background()
	src := enginetest.NewCluster(t, "kmirror-test-source")
	dst, app := guardedDestination(t)
	srcCl := src.Client(t)
	src.CreateTopic(t, "orders", 2, nil)
	enginetest.Produce(t, src.Client(t, enginetest.ProducerOpts("zstd", true)...), "orders", 2, 50, "before")

	tc, mech, err := engine.SecurityParts(dst.settings)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, engine.Config{Destination: dst.c.Addrs(), DestinationOpts: dst.opts, DestinationTLS: tc, DestinationSASL: mech, Instance: "guarded"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	if err := eng.StartMirror(ctx, engine.MirrorConfig{
		Name: "a-to-b", SourceBootstrap: src.Addrs(), Topics: []string{"orders"}, WriteGuard: true,
		RetryInitial: 20 * time.Millisecond, RetryMax: time.Second, CheckInterval: 200 * time.Millisecond,
	}); err != nil {
		t.Fatal(err)
	}
	dstCl := dst.client(t)
	adm := kadm.NewClient(dstCl)
	waitAll := func(state partition.State) {
		t.Helper()
		enginetest.Wait(t, 60*time.Second, func() (bool, string) {
			var st []string
			ok := true
			for _, m := range eng.Snapshot().Mirrors {
				for _, p := range m.Partitions {
					st = append(st, fmt.Sprintf("%d:%s %q", p.Partition, p.State, p.Error))
					ok = ok && p.State == state
				}
			}
			return ok && len(st) == 2, fmt.Sprintf("want every partition %s: %v", state, st)
		})
	}
	waitAll(partition.Mirroring)
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		se, err1 := enginetest.Ends(ctx, srcCl, "orders")
		de, err2 := enginetest.Ends(ctx, dstCl, "orders")
		return err1 == nil && err2 == nil && slices.Equal(se, de), fmt.Sprintf("source %v destination %v (%v %v)", se, de, err1, err2)
	})
	if got := guardACLs(t, adm, "orders"); len(got) != 1 {
		t.Fatalf("guard ACLs while mirrored: %v, want one", got)
	}

	// The app's own ALLOW does not help: the broker refuses its write.
	for p := range int32(2) {
		if err := appWrite(app, p); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("app write to mirrored orders/%d: %v, want TOPIC_AUTHORIZATION_FAILED", p, err)
		}
	}
	// kmirror itself still mirrors (its principal is a super user).
	enginetest.Produce(t, src.Client(t, enginetest.ProducerOpts("lz4", true)...), "orders", 2, 30, "during")
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		se, _ := enginetest.Ends(ctx, srcCl, "orders")
		de, _ := enginetest.Ends(ctx, dstCl, "orders")
		return slices.Equal(se, de), fmt.Sprintf("source %v destination %v", se, de)
	})
	for p := range int32(2) {
		if _, err := enginetest.CompareBatches(ctx, srcCl, dstCl, "orders", p); err != nil {
			t.Fatal(err)
		}
	}

	if err := eng.Control(ctx, engine.Command{Kind: engine.CmdStop, Mirror: "a-to-b"}); err != nil {
		t.Fatal(err)
	}
	waitAll(partition.Stopped)
	if got := guardACLs(t, adm, "orders"); len(got) != 0 {
		t.Fatalf("guard ACLs after the stop: %v, want none", got)
	}
	for p := range int32(2) {
		if err := appWrite(app, p); err != nil {
			t.Fatalf("app write to stopped orders/%d: %v", p, err)
		}
	}
}

// A guarded mirror cannot be created against a destination without an
// authorizer: the guard could never hold.
func TestWriteGuardNeedsAuthorizer(t *testing.T) {
	ctx := context.Background()
	src := enginetest.NewCluster(t, "kmirror-test-source")
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	// kfake answers DescribeAcls without an authorizer; a Kafka broker
	// without one answers SECURITY_DISABLED, as this does.
	dst.ControlKey(int16(kmsg.DescribeACLs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		dst.KeepControl()
		resp := kr.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.Version = kr.GetVersion()
		resp.ErrorCode = kerr.SecurityDisabled.Code
		msg := "No Authorizer is configured."
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
	adm, err := engine.NewAdmin(ctx, dst.Addrs(), nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	cfg := props.FromMap(map[string]string{"bootstrap.servers": strings.Join(src.Addrs(), ","), props.KeyWriteGuard: props.WriteGuardACL})
	_, err = adm.CreateMirror(ctx, "a-to-b", cfg, false)
	if !errors.Is(err, engine.ErrNoAuthorizer) || !errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("create with the guard and no authorizer: %v, want %v", err, engine.ErrNoAuthorizer)
	}
	t.Logf("create refused: %v", err)
	// The setting's default (none) asks nothing of the destination.
	cfg = props.FromMap(map[string]string{"bootstrap.servers": strings.Join(src.Addrs(), ",")})
	if _, err := adm.CreateMirror(ctx, "a-to-b", cfg, false); err != nil {
		t.Fatalf("create without the guard: %v", err)
	}
}
