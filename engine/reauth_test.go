package engine_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/engine/enginetest"
	"github.com/kmirror/kmirror/engine/partition"
)

// TestSASLReauthentication: both clusters require SASL (SCRAM-SHA-256 on
// the source, PLAIN on the destination), announce a 3 s session lifetime
// and close a connection whose session ended at its next request, as
// brokers with connections.max.reauth.ms=3000 do. Records flow for at least
// three lifetimes; every client kmirror has (franz-go's and its own fetch
// and produce connections) authenticates again in time: no connection is
// closed for an expired session, no partition leaves MIRRORING or realigns
// (each writer epoch stays), and the destination is identical. (Three
// seconds, not two: franz-go renews a second before the end, which for a
// two-second session is at the edge of the broker's one second between
// renewals.)
func TestSASLReauthentication(t *testing.T) {
	const user, pw, lifetime = "mirror", "reauth-pw-c41e", 3 * time.Second
	reauth := kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": fmt.Sprint(lifetime.Milliseconds())})
	srcSessions, dstSessions := enginetest.NewSASLSessions(), enginetest.NewSASLSessions()
	srcSettings := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": pw}
	dstSettings := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": pw}
	src := newSecuredSide(t, "kmirror-test-source", srcSettings, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", user, pw), reauth, kfake.ListenFn(srcSessions.Listen))
	dst := newSecuredSide(t, "kmirror-test-destination", dstSettings, kfake.EnableSASL(), kfake.Superuser("PLAIN", user, pw), reauth, kfake.ListenFn(dstSessions.Listen))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srcCl, dstCl := src.client(t), dst.client(t)
	const topic = "reauth"
	if resp, err := kadm.NewClient(srcCl).CreateTopic(ctx, 2, -1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create source topic: %v %v", err, resp.Err)
	}
	t.Setenv(sourcePasswordEnv, pw)
	srcConfig := maps.Clone(srcSettings)
	srcConfig["sasl.password"] = "${env:" + sourcePasswordEnv + "}"
	eng := runSecuredMirror(t, ctx, src, srcConfig, dst, topic, "reauth")

	producer := src.client(t, enginetest.ProducerOpts("zstd", true)...)
	epochs := map[int32]int16{}
	mirrored := func() (bool, string) {
		se, err1 := enginetest.Ends(ctx, srcCl, topic)
		de, err2 := enginetest.Ends(ctx, dstCl, topic)
		var st []string
		ok := err1 == nil && err2 == nil && slices.Equal(se, de)
		for _, m := range eng.Snapshot().Mirrors {
			for _, p := range m.Partitions {
				st = append(st, fmt.Sprintf("%d:%s epoch %d %q", p.Partition, p.State, p.WriterEpoch, p.Error))
				ok = ok && p.State == partition.Mirroring
			}
		}
		return ok, fmt.Sprintf("source %v destination %v (%v %v); partitions %v", se, de, err1, err2, st)
	}
	// kmirror's own connections (software "kmirror") are told apart from
	// its franz-go clients ("kgo"): fetch connections by their client id
	// on the source, produce connections on the destination.
	ownReauths := func(s *enginetest.SASLSessions) int {
		var n int
		for who, c := range s.Reauthentications() {
			if who.Software == "kmirror" {
				n += c
			}
		}
		return n
	}
	kgoReauths := func(s *enginetest.SASLSessions) int {
		var n int
		for who, c := range s.Reauthentications() {
			if who.Software == "kgo" && strings.HasPrefix(who.ID, "reauth") {
				n += c
			}
		}
		return n
	}
	start := time.Now()
	for round := 0; ; round++ {
		enginetest.Produce(t, producer, topic, 2, 20, fmt.Sprintf("round-%d", round))
		enginetest.Wait(t, 30*time.Second, mirrored)
		for _, m := range eng.Snapshot().Mirrors {
			for _, p := range m.Partitions {
				if was, ok := epochs[p.Partition]; ok && was != p.WriterEpoch {
					t.Fatalf("%s/%d: writer epoch %d, was %d: the partition realigned", p.Topic, p.Partition, p.WriterEpoch, was)
				}
				epochs[p.Partition] = p.WriterEpoch
			}
		}
		for _, s := range []*enginetest.SASLSessions{srcSessions, dstSessions} {
			if exp, soon := s.Expired(), s.TooSoon(); len(exp)+len(soon) > 0 {
				t.Fatalf("after %s: connections closed for an expired session %v, for a re-authentication too soon %v (re-authentications: source %v, destination %v)",
					time.Since(start).Round(time.Millisecond), exp, soon, srcSessions.Reauthentications(), dstSessions.Reauthentications())
			}
		}
		if time.Since(start) > 3*lifetime && ownReauths(srcSessions) >= 3 && ownReauths(dstSessions) >= 3 &&
			kgoReauths(srcSessions) > 0 && kgoReauths(dstSessions) > 0 {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("after a minute: re-authentications on the source %v, on the destination %v", srcSessions.Reauthentications(), dstSessions.Reauthentications())
		}
	}
	t.Logf("after %s: re-authentications on the source %v, on the destination %v", time.Since(start).Round(time.Millisecond),
		srcSessions.Reauthentications(), dstSessions.Reauthentications())
	for p := range int32(2) {
		n, err := enginetest.CompareBatches(ctx, srcCl, dstCl, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("%s/%d: no batch compared", topic, p)
		}
	}
}
