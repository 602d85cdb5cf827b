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
	"github.com/kmirror/kmirror/engine/store"
)

// answerACLs makes the cluster answer every DescribeAcls with acls
// (resource type, name, operation, permission, principal; a name ending in
// "*" other than "*" itself is a prefix): kfake's authorizer holds no USER
// or DELEGATION_TOKEN ACLs, which a Kafka broker's does.
func answerACLs(c *enginetest.Cluster, acls ...acl) {
	c.ControlKey(int16(kmsg.DescribeACLs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := kr.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.Version = kr.GetVersion()
		for _, a := range acls {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, _ = kmsg.ParseACLResourceType(a.resourceType)
			res.ResourceName, res.ResourcePatternType = a.name, kmsg.ACLResourcePatternTypeLiteral
			if a.name != "*" && strings.HasSuffix(a.name, "*") {
				res.ResourceName, res.ResourcePatternType = strings.TrimSuffix(a.name, "*"), kmsg.ACLResourcePatternTypePrefixed
			}
			d := kmsg.NewDescribeACLsResponseResourceACL()
			d.Principal, d.Host = a.principal, "*"
			d.Operation, _ = kmsg.ParseACLOperation(a.operation)
			d.PermissionType, _ = kmsg.ParseACLPermissionType(a.permission)
			res.ACLs = append(res.ACLs, d)
			resp.Resources = append(resp.Resources, res)
		}
		return resp, nil, true
	})
}

// TestACLSyncScopedAndWriteHeldUntilStop: of a source's CLUSTER, USER,
// TRANSACTIONAL_ID, prefixed and wildcard topic ACLs and its READ, WRITE,
// ALL and DENY ACLs on a mirrored topic, only the mirror's scope reaches a
// SASL destination with an authorizer; the WRITE grants (of WRITE and of
// ALL) are recorded in __mirror_state and created by --stop, so "app",
// which may write to the topic on the source, is refused on the
// destination while the topic is mirrored and writes right after the stop.
func TestACLSyncScopedAndWriteHeldUntilStop(t *testing.T) {
	ctx := context.Background()
	const user, pw, appPW = "kmirror", "dest-pw-5d1e", "app-pw-90b3"
	settings := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": pw}
	dst := newSecuredSide(t, "kmirror-test-destination", settings,
		kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", user, pw), kfake.User("PLAIN", "app", appPW))
	appOpts, err := engine.SecurityOpts(map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "app", "sasl.password": appPW})
	if err != nil {
		t.Fatal(err)
	}
	app := dst.c.Client(t, append(appOpts, kgo.DisableIdempotentWrite(), kgo.RecordRetries(0), kgo.RequestRetries(0))...)
	dstCl := dst.client(t)

	src := enginetest.NewCluster(t, "kmirror-test-source")
	srcCl := src.Client(t)
	src.CreateTopic(t, "orders", 2, nil)
	enginetest.Produce(t, srcCl, "orders", 2, 20, "x")
	// A destination topic of its own, which the prefix "o" also matches.
	if resp, err := kadm.NewClient(dstCl).CreateTopic(ctx, 1, -1, nil, "other"); err != nil || resp.Err != nil {
		t.Fatalf("create destination topic: %v %v", err, resp.Err)
	}

	copied := []acl{
		{"topic", "orders", "read", "allow", "User:app"},
		{"topic", "orders", "read", "allow", "User:bob"},     // of bob's ALL
		{"topic", "orders", "describe", "allow", "User:bob"}, // of bob's ALL
		{"topic", "orders", "read", "deny", "User:mallory"},
		{"group", "app-1", "read", "allow", "User:app"},
	}
	answerACLs(src,
		acl{"topic", "orders", "read", "allow", "User:app"},
		acl{"topic", "orders", "write", "allow", "User:app"},
		acl{"topic", "orders", "all", "allow", "User:bob"},
		acl{"topic", "orders", "read", "deny", "User:mallory"},
		acl{"topic", "orders", "alter", "allow", "User:carol"},
		acl{"topic", "*", "read", "allow", "User:erin"},
		acl{"group", "app-1", "read", "allow", "User:app"},
		acl{"cluster", "kafka-cluster", "alter", "allow", "User:app"},
		acl{"user", "User:app", "create_tokens", "allow", "User:app"},
		acl{"transactional_id", "app-tx", "write", "allow", "User:app"},
		acl{"delegation_token", "t-1", "describe", "allow", "User:app"},
		acl{"topic", "ord*", "read", "allow", "User:dave"}, // every destination match mirrored
		acl{"topic", "o*", "read", "allow", "User:erin"},   // matches "other" too
	)
	copiedPrefixed := "topic;ord;read;allow;user:dave"

	adm, err := engine.NewAdmin(ctx, dst.c.Addrs(), settings, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	cfg := props.FromMap(map[string]string{"bootstrap.servers": strings.Join(src.Addrs(), ","), "mirror.metadata.refresh.interval.ms": "100"})
	if _, err := adm.CreateMirror(ctx, "a-to-b", cfg, false); err != nil {
		t.Fatal(err)
	}
	sel, err := engine.ParseTopics("orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Start(ctx, "a-to-b", sel, nil); err != nil {
		t.Fatal(err)
	}
	tc, mech, err := engine.SecurityParts(settings)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(ctx, engine.Config{Destination: dst.c.Addrs(), DestinationOpts: dst.opts, DestinationTLS: tc, DestinationSASL: mech, Instance: "scoped"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	if err := eng.Join(ctx); err != nil {
		t.Fatal(err)
	}

	want := []string{copiedPrefixed}
	for _, a := range copied {
		want = append(want, strings.ToLower(a.String()))
	}
	slices.Sort(want)
	held := func() []store.HeldGrant {
		cat, err := adm.Catalog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return cat.HeldACLs[store.TopicRef{Mirror: "a-to-b", Topic: "orders"}].Grants
	}
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		got := listACLs(t, dstCl)
		h := held()
		return slices.Equal(got, want) && len(h) == 2, fmt.Sprintf("destination ACLs\n%v\nwant\n%v\nheld back %v", got, want, h)
	})
	if h := held(); h[0].Principal != "User:app" || h[1].Principal != "User:bob" || h[1].From != "LITERAL orders ALL" {
		t.Errorf("held back %+v, want app's WRITE and bob's ALL", h)
	}
	// Several rounds later nothing more arrived, and app cannot write.
	for _, m := range eng.Snapshot().Mirrors {
		from := m.Meta.Rounds
		enginetest.Wait(t, 30*time.Second, func() (bool, string) {
			r := eng.Snapshot().Mirrors[0].Meta.Rounds
			return r >= from+3, fmt.Sprintf("%d sync rounds, want %d", r, from+3)
		})
	}
	if got := listACLs(t, dstCl); !slices.Equal(got, want) {
		t.Errorf("destination ACLs after more rounds\n%v\nwant\n%v", got, want)
	}
	heldWrites := func() []string {
		rows, err := adm.Describe(ctx, "a-to-b")
		if err != nil || len(rows) != 2 {
			t.Fatalf("describe: %v %+v", err, rows)
		}
		return rows[0].HeldWrites
	}
	if got := heldWrites(); !slices.Equal(got, []string{"User:app@*", "User:bob@*"}) {
		t.Errorf("--describe shows held WRITE grants %v", got)
	}
	for p := range int32(2) {
		if err := appWrite(app, p); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("app write to mirrored orders/%d: %v, want TOPIC_AUTHORIZATION_FAILED", p, err)
		}
	}

	if _, err := adm.Control(ctx, engine.CmdStop, "a-to-b", nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Wait(ctx, "a-to-b", nil, partition.Stopped, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	got := listACLs(t, dstCl)
	for _, w := range []string{"topic;orders;write;allow;user:app", "topic;orders;write;allow;user:bob"} {
		if !slices.Contains(got, w) {
			t.Errorf("after the stop the destination ACLs %v lack %s", got, w)
		}
	}
	if h := heldWrites(); len(h) != 0 {
		t.Errorf("--describe of the stopped topic shows held WRITE grants %v", h)
	}
	if len(got) != len(want)+2 {
		t.Errorf("after the stop the destination ACLs %v: want the %d synced and the 2 WRITE grants", got, len(want))
	}
	for p := range int32(2) {
		if err := appWrite(app, p); err != nil {
			t.Fatalf("app write to stopped orders/%d: %v", p, err)
		}
	}
}
