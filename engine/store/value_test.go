package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var when = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func sampleMirror() MirrorDef {
	return MirrorDef{
		Name:            "a-to-b",
		SourceBootstrap: []string{"a1.example.com:9093", "a2.example.com:9093"},
		SourceClusterID: "MkU3OEVBNTcwNTJENDM2Qg",
		SourceConfig: map[string]string{
			"security.protocol": "SASL_SSL",
			"sasl.mechanism":    "SCRAM-SHA-512",
			"sasl.username":     "kmirror",
			"sasl.password":     "${env:KMIRROR_SOURCE_PASSWORD}",
		},
		Config:    map[string]string{"mirror.gap.policy": "fail", "mirror.num.fetchers": "2"},
		CreatedAt: when,
	}
}

func sampleTopic() TopicDesired {
	return TopicDesired{
		Mirror: "a-to-b", Topic: "orders.eu_v2", Desired: partition.DesiredPause,
		Pattern: "orders\\..*", Exclude: "__.*",
		SourceTopicID: "b5d1c3a0-6f0e-4f4c-9a37-2f1a6c0b9d11", DestTopicID: "0f6a1d3c2b7e4e0a8c1d9e2f3a4b5c6d",
		UpdatedAt: when.Add(time.Minute), RebuildRequested: true,
	}
}

func samplePartition() PartitionRecord {
	r := NewPartitionRecord("a-to-b", "orders.eu_v2", 7)
	r.SetStatus(partition.Status{
		State: partition.Failed, StateEpoch: 42, Desired: partition.DesiredStart,
		PrevState: partition.Mirroring, Attempt: 3, Error: "append at 1200: destination log end 1203",
		Cause: partition.CauseOffsetMismatch, Retryable: true, NextRetry: when.Add(800 * time.Millisecond),
	})
	r.LastOffset, r.LastEpoch = 1199, 5
	r.Lineage = []EpochStart{{0, 0}, {3, 410}, {5, 1100}}
	r.WriterID, r.WriterEpoch = 9001, 4
	r.Owner = "kmirror-7f9c"
	r.UpdatedAt = when.Add(2 * time.Minute)
	return r
}

func sampleInstance() InstanceHeartbeat {
	return InstanceHeartbeat{
		Instance: "dr-host-2-4411", Host: "dr-host-2", Version: "v0.9.0 (3f2a1c9)",
		StartedAt: when, At: when.Add(3 * time.Minute), IntervalMs: 3000,
		Shards: []int32{5, 15, 41},
		Mirrors: []InstanceMirror{{
			Name: "a-to-b", Topics: 2, Partitions: 5,
			Source:      Reach{State: ReachUnreachable, At: when.Add(179 * time.Second), Error: "source metadata: dial tcp 10.0.0.7:9093: connection refused"},
			Destination: Reach{State: ReachReachable, At: when.Add(3 * time.Minute)},
		}},
	}
}

func sampleRebuild() RebuildRecord {
	return RebuildRecord{
		Mirror: "a-to-b", Topic: "orders.eu_v2", Step: RebuildPlanned,
		Quarantine: "orders.eu_v2.kmirror-quarantine-20250301T120000.000-a-to-b",
		Partitions: 3,
		Configs:    map[string]string{"cleanup.policy": "delete", "compression.type": "producer", "message.timestamp.type": "CreateTime"},
		Ranges: []RebuildRange{
			{Partition: 0, From: 30, To: 50, Copied: 20, Checked: true},
			{Partition: 1, From: 50, To: 50, Checked: true},
			{Partition: 2, From: 10, To: 50, Copied: 12},
		},
		SourceTopicID: "tUwTdXIdRXyx3YOSi5_xmg", ReplacedTopicID: "nB7b1oF2R8uTn7vNd0bS7A",
		Owner: "kmirror-7f9c", StartedAt: when, UpdatedAt: when.Add(3 * time.Second),
	}
}

func sampleHeldACLs() HeldACLs {
	return HeldACLs{
		Mirror: "a-to-b", Topic: "orders.eu_v2",
		Grants: []HeldGrant{
			{Principal: "User:billing", Host: "*", From: "PREFIXED orders ALL"},
			{Principal: "User:orders-app", Host: "10.0.0.8", From: "LITERAL orders.eu_v2 WRITE"},
		},
		UpdatedAt: when.Add(4 * time.Second),
	}
}

type golden struct {
	file   string
	want   any
	encode func() ([]byte, error)
	decode func([]byte) (any, error)
}

func goldens() []golden {
	return []golden{
		{"v1/mirror.json", sampleMirror(),
			func() ([]byte, error) { return EncodeMirror(sampleMirror()) },
			func(b []byte) (any, error) { return DecodeMirror(b) }},
		{"v1/topic.json", sampleTopic(),
			func() ([]byte, error) { return EncodeTopic(sampleTopic()) },
			func(b []byte) (any, error) { return DecodeTopic(b) }},
		{"v1/partition.json", samplePartition(),
			func() ([]byte, error) { return EncodePartition(samplePartition()) },
			func(b []byte) (any, error) { return DecodePartition(b) }},
		{"v1/instance.json", sampleInstance(),
			func() ([]byte, error) { return EncodeInstance(sampleInstance()) },
			func(b []byte) (any, error) { return DecodeInstance(b) }},
		{"v1/rebuild.json", sampleRebuild(),
			func() ([]byte, error) { return EncodeRebuild(sampleRebuild()) },
			func(b []byte) (any, error) { return DecodeRebuild(b) }},
		{"v1/acls.json", sampleHeldACLs(),
			func() ([]byte, error) { return EncodeHeldACLs(sampleHeldACLs()) },
			func(b []byte) (any, error) { return DecodeHeldACLs(b) }},
	}
}

// TestGoldenV1 keeps version 1 readable forever: the committed fixtures must
// decode to the expected values, and today's encoder must still write them.
func TestGoldenV1(t *testing.T) {
	for _, g := range goldens() {
		path := filepath.Join("testdata", g.file)
		enc, err := g.encode()
		if err != nil {
			t.Fatalf("%s: encode: %v", g.file, err)
		}
		if *update {
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, enc, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fixture, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		got, err := g.decode(fixture)
		if err != nil {
			t.Fatalf("%s: decode: %v", g.file, err)
		}
		if !reflect.DeepEqual(got, g.want) {
			t.Errorf("%s decodes to\n%+v\nwant\n%+v", g.file, got, g.want)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, fixture); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(compact.Bytes(), enc) {
			t.Errorf("%s: encoder output changed:\n got %s\nwant %s", g.file, enc, compact.Bytes())
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, g := range goldens() {
		enc, err := g.encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := g.decode(enc)
		if err != nil || !reflect.DeepEqual(got, g.want) {
			t.Errorf("%s: round trip gave %+v, %v", g.file, got, err)
		}
	}
	// Empty collections and zero times come back as nil and zero.
	d := MirrorDef{Name: "m", SourceBootstrap: []string{}, Config: map[string]string{}}
	b, err := EncodeMirror(d)
	if err != nil || string(b) != `{"v":1,"name":"m"}` {
		t.Fatalf("minimal mirror encodes as %s, %v", b, err)
	}
}

func TestDecodeDefaultsAndNormalisation(t *testing.T) {
	r, err := DecodePartition([]byte(`{"v":1,"mirror":"m","topic":"t","partition":0,"future":{"x":1},
		"nextRetry":"2025-03-01T13:00:00+01:00","lineage":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.LastOffset != -1 || r.LastEpoch != -1 || r.WriterID != -1 || r.WriterEpoch != -1 || r.State != partition.Unknown {
		t.Errorf("missing fields did not default to none: %+v", r)
	}
	if !r.NextRetry.Equal(when) || r.NextRetry.Location() != time.UTC || r.Lineage != nil {
		t.Errorf("not normalised: next %v lineage %#v", r.NextRetry, r.Lineage)
	}
}

func TestLineageKeepsNewest(t *testing.T) {
	r := NewPartitionRecord("m", "t", 0)
	for e := range int32(20) {
		r.Lineage = append(r.Lineage, EpochStart{Epoch: e, Start: int64(e) * 100})
	}
	b, err := EncodePartition(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodePartition(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Lineage) != MaxLineage || got.Lineage[0].Epoch != 4 || got.Lineage[MaxLineage-1].Epoch != 19 {
		t.Fatalf("lineage = %v", got.Lineage)
	}
}

func TestStatusConversion(t *testing.T) {
	r := samplePartition()
	cfg := partition.Config{MaxAttempts: 5}
	s := r.Status(cfg)
	if s.State != partition.Failed || s.StateEpoch != 42 || s.Attempt != 3 || s.Config != cfg || !s.Retryable {
		t.Fatalf("Status() = %+v", s)
	}
	var back PartitionRecord
	back.SetStatus(s)
	if back.Status(cfg) != s {
		t.Fatal("SetStatus does not round-trip")
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, in  string
		isVersion bool // want *VersionError rather than ErrMalformed
		want      string
	}{
		{"not json", `{"v":1,`, false, "unexpected end"},
		{"no version", `{"name":"m"}`, false, `no version field "v"`},
		{"null", `null`, false, `no version field "v"`},
		{"array", `[1]`, false, "cannot unmarshal"},
		{"float version", `{"v":1.5}`, false, "cannot unmarshal"},
		{"future version", `{"v":2,"mirror":"m"}`, true, "version 2 is not supported"},
		{"old version", `{"v":0}`, true, "version 0 is not supported"},
		{"bad name", `{"v":1,"mirror":"m/x","topic":"t"}`, false, "contains '/'"},
		{"bad state", `{"v":1,"mirror":"m","topic":"t","state":"RUNNING"}`, false, "unknown partition state"},
		{"negative partition", `{"v":1,"mirror":"m","topic":"t","partition":-2}`, false, "negative partition"},
		{"writer epoch overflow", `{"v":1,"mirror":"m","topic":"t","writerEpoch":40000}`, false, "cannot unmarshal"},
		{"far-off year", `{"v":1,"mirror":"m","topic":"t","updatedAt":"0000-01-01T00:00:00+01:00"}`, false, "year -1"},
	}
	for _, tt := range tests {
		_, err := DecodePartition([]byte(tt.in))
		var ve *VersionError
		switch {
		case tt.isVersion:
			if !errors.As(err, &ve) || errors.Is(err, ErrMalformed) {
				t.Errorf("%s: err %v, want *VersionError", tt.name, err)
			}
		case !errors.Is(err, ErrMalformed):
			t.Errorf("%s: err %v, want ErrMalformed", tt.name, err)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
	if _, err := DecodeTopic([]byte(`{"v":1,"mirror":"m","topic":"t"}`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("topic without desired state: %v", err)
	}
	if _, err := DecodeTopic([]byte(`{"v":1,"mirror":"m","topic":"t","desired":"run"}`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("topic with unknown desired state: %v", err)
	}
	if _, err := EncodeMirror(MirrorDef{Name: "a/b"}); err == nil {
		t.Error("EncodeMirror accepted a name with '/'")
	}
}

func TestDecodeRecord(t *testing.T) {
	val, _ := EncodePartition(samplePartition())
	k, v, err := Decode(PartitionKey("a-to-b", "orders.eu_v2", 7).Bytes(), val)
	if err != nil || k.Kind != KindPartition || !reflect.DeepEqual(v, samplePartition()) {
		t.Fatalf("Decode = %+v, %+v, %v", k, v, err)
	}
	if _, _, err := Decode(PartitionKey("a-to-b", "orders.eu_v2", 8).Bytes(), val); !errors.Is(err, ErrMalformed) {
		t.Fatalf("value under the wrong key: %v", err)
	}
	k, v, err = Decode([]byte("mirror/a-to-b"), nil)
	if err != nil || v != nil || k != MirrorKey("a-to-b") {
		t.Fatalf("tombstone: %+v %v %v", k, v, err)
	}
	mval, _ := EncodeMirror(sampleMirror())
	if _, v, err := Decode([]byte("mirror/a-to-b"), mval); err != nil || !reflect.DeepEqual(v, sampleMirror()) {
		t.Fatalf("mirror record: %v %v", v, err)
	}
	tval, _ := EncodeTopic(sampleTopic())
	if _, v, err := Decode([]byte("topic/a-to-b/orders.eu_v2"), tval); err != nil || !reflect.DeepEqual(v, sampleTopic()) {
		t.Fatalf("topic record: %v %v", v, err)
	}
	ival, _ := EncodeInstance(sampleInstance())
	if _, v, err := Decode([]byte("instance/dr-host-2-4411"), ival); err != nil || !reflect.DeepEqual(v, sampleInstance()) {
		t.Fatalf("instance record: %v %v", v, err)
	}
	if _, _, err := Decode([]byte("instance/other"), ival); !errors.Is(err, ErrMalformed) {
		t.Fatalf("heartbeat under another instance's key: %v", err)
	}
	if _, _, err := Decode([]byte("lme/a/b/0"), val); !errors.Is(err, ErrBadKey) {
		t.Fatalf("bad key: %v", err)
	}
	if _, _, err := Decode([]byte("mirror/a-to-b"), []byte{}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty non-nil value: %v", err)
	}
}

// TestPartitionTopicIDs: the topic ids added to version 1 partition records
// round-trip, and a record written before them (the v1 fixture) reads as
// ids unknown.
func TestPartitionTopicIDs(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "v1", "partition.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodePartition(old)
	if err != nil || r.SourceTopicID != "" || r.DestTopicID != "" {
		t.Fatalf("v1 fixture: ids %q %q, %v; want none", r.SourceTopicID, r.DestTopicID, err)
	}
	want := samplePartition()
	want.SourceTopicID, want.DestTopicID = "tUwTdXIdRXyx3YOSi5_xmg", "nB7b1oF2R8uTn7vNd0bS7A"
	b, err := EncodePartition(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"sourceTopicId":"tUwTdXIdRXyx3YOSi5_xmg"`)) {
		t.Errorf("encoded %s lacks sourceTopicId", b)
	}
	got, err := DecodePartition(b)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip gave %+v, %v", got, err)
	}
}

func TestInstanceHeartbeat(t *testing.T) {
	h := sampleInstance()
	h.Shards = []int32{41, 5, 15} // the encoder sorts
	b, err := EncodeInstance(h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeInstance(b)
	if err != nil || !reflect.DeepEqual(got, sampleInstance()) {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	if !got.Owns(15) || got.Owns(16) {
		t.Errorf("Owns: shards %v", got.Shards)
	}
	at := got.At
	for _, tt := range []struct {
		now  time.Time
		stop bool
		live bool
	}{
		{at, false, true},
		{at.Add(8999 * time.Millisecond), false, true},
		{at.Add(9 * time.Second), false, false},
		{at, true, false},
	} {
		got.Stopped = tt.stop
		if l := got.Live(tt.now, 3); l != tt.live {
			t.Errorf("Live(%v, stopped %v) = %v", tt.now.Sub(at), tt.stop, l)
		}
	}
	// A reachability left out reads as unknown; bad values are malformed.
	d, err := DecodeInstance([]byte(`{"v":1,"instance":"i","at":"2025-03-01T12:00:00Z","mirrors":[{"name":"m"}]}`))
	if err != nil || d.Mirrors[0].Source.State != ReachUnknown || d.Mirrors[0].Destination.State != ReachUnknown || d.Interval() != time.Second {
		t.Fatalf("defaults: %+v, %v", d, err)
	}
	for _, bad := range []string{
		`{"v":1,"instance":"a/b"}`,
		`{"v":1,"instance":"i","shards":[50]}`,
		`{"v":1,"instance":"i","shards":[3,3]}`,
		`{"v":1,"instance":"i","intervalMs":-1}`,
		`{"v":1,"instance":"i","mirrors":[{"name":"m","source":{"state":"maybe"}}]}`,
		`{"v":1,"instance":"i","mirrors":[{"name":"m"},{"name":"m"}]}`,
	} {
		if _, err := DecodeInstance([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeInstance(%s) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestCatalogInstances(t *testing.T) {
	c := NewCatalog()
	put := func(h InstanceHeartbeat) {
		t.Helper()
		b, err := EncodeInstance(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := c.Apply(InstanceKey(h.Instance).Bytes(), b); err != nil || !ok {
			t.Fatalf("apply: %v %v", ok, err)
		}
	}
	put(InstanceHeartbeat{Instance: "old", At: when, IntervalMs: 1000, Shards: []int32{7}})
	put(InstanceHeartbeat{Instance: "new", At: when.Add(2 * time.Second), IntervalMs: 1000, Shards: []int32{7, 8}})
	if h, ok := c.ShardOwner(7, when.Add(2500*time.Millisecond), 3); !ok || h.Instance != "new" {
		t.Errorf("shard 7 owner = %+v, %v; want the newest live claim", h, ok)
	}
	if _, ok := c.ShardOwner(7, when.Add(10*time.Second), 3); ok {
		t.Error("a stale claim counts as an owner")
	}
	if _, ok := c.ShardOwner(9, when, 3); ok {
		t.Error("an unclaimed shard has an owner")
	}
	if cl := c.Clone(); len(cl.Instances) != 2 {
		t.Errorf("clone has %d instances", len(cl.Instances))
	}
	if _, _, err := c.Apply(InstanceKey("old").Bytes(), nil); err != nil || len(c.Instances) != 1 {
		t.Errorf("tombstone: %v, %d left", err, len(c.Instances))
	}
}

// TestRebuildRecord: every step round-trips by name through Decode and the
// catalog; records that would mislead a resume are refused both ways.
func TestRebuildRecord(t *testing.T) {
	cat := NewCatalog()
	for s := RebuildPlanned; s <= RebuildAbandoned; s++ {
		r := sampleRebuild()
		r.Step = s
		if s >= RebuildQuarantined {
			r.Ranges[2].Copied, r.Ranges[2].Checked = 40, true
		}
		if s >= RebuildRecreated {
			r.DestTopicID = "AAAAAAAAAAAAAAAAAAAAAA"
		}
		b, err := EncodeRebuild(r)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if !bytes.Contains(b, []byte(`"step":"`+s.String()+`"`)) {
			t.Errorf("%s encodes as %s", s, b)
		}
		if _, ok, err := cat.Apply(RebuildKey(r.Mirror, r.Topic).Bytes(), b); err != nil || !ok {
			t.Fatalf("%s: apply %v", s, err)
		}
		if got := cat.Rebuilds[TopicRef{r.Mirror, r.Topic}]; !reflect.DeepEqual(got, r) {
			t.Errorf("%s: catalog holds %+v", s, got)
		}
	}
	if !RebuildDone.Finished() || !RebuildAbandoned.Finished() || RebuildDeleted.Finished() {
		t.Error("Finished")
	}
	if got := cat.Clone().Rebuilds; len(got) != 1 {
		t.Errorf("clone holds %d rebuilds", len(got))
	}
	if _, _, err := cat.Apply(RebuildKey("a-to-b", "orders.eu_v2").Bytes(), nil); err != nil || len(cat.Rebuilds) != 0 {
		t.Errorf("tombstone: %v, %d left", err, len(cat.Rebuilds))
	}
	bad := map[string]func(*RebuildRecord){
		"no step":               func(r *RebuildRecord) { r.Step = RebuildNone },
		"no quarantine":         func(r *RebuildRecord) { r.Quarantine = "" },
		"no partitions":         func(r *RebuildRecord) { r.Partitions = 0 },
		"backwards range":       func(r *RebuildRecord) { r.Ranges[0].To = 10 },
		"repeated partition":    func(r *RebuildRecord) { r.Ranges[1].Partition = 0 },
		"more copied than held": func(r *RebuildRecord) { r.Ranges[0].Copied = 21 },
		"quarantined unchecked": func(r *RebuildRecord) { r.Step = RebuildQuarantined },
	}
	for name, edit := range bad {
		r := sampleRebuild()
		edit(&r)
		if _, err := EncodeRebuild(r); err == nil {
			t.Errorf("%s: encoded", name)
		}
		b, _ := json.Marshal(rebuildV1{V: Version, RebuildRecord: r})
		if _, err := DecodeRebuild(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: decode gave %v, want ErrMalformed", name, err)
		}
	}
	if _, err := DecodeRebuild([]byte(`{"v":1,"mirror":"m","topic":"t","step":"later","quarantine":"q","partitions":1}`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("unknown step: %v", err)
	}
	if _, _, err := Decode(RebuildKey("a-to-b", "other").Bytes(), mustEncodeRebuild(t, sampleRebuild())); !errors.Is(err, ErrMalformed) {
		t.Errorf("value under the wrong key: %v", err)
	}
}

func mustEncodeRebuild(t *testing.T, r RebuildRecord) []byte {
	t.Helper()
	b, err := EncodeRebuild(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
