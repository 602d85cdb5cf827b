package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCatalogSequence folds a random sequence of records into a catalog,
// as a replay of __mirror_state does: valid fixtures, their tombstones,
// garbage keys and values, in any order. A record that does not decode
// fails with the package's errors and leaves the catalog as it was;
// nothing panics; a partition record never replaces one of a newer state
// epoch; and the catalog a record left is the one a fresh replay of the
// same sequence builds (a replay is deterministic).
func FuzzCatalogSequence(f *testing.F) {
	var fixtures [][2][]byte
	for _, fx := range []struct {
		file string
		key  Key
	}{
		{"mirror.json", MirrorKey("a-to-b")},
		{"topic.json", TopicKey("a-to-b", "orders")},
		{"partition.json", PartitionKey("a-to-b", "orders", 0)},
		{"rebuild.json", RebuildKey("a-to-b", "orders")},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "v1", fx.file))
		if err != nil {
			f.Fatal(err)
		}
		fixtures = append(fixtures, [2][]byte{fx.key.Bytes(), b})
	}
	f.Add([]byte{0, 1, 2, 3, 0x80, 2, 1})
	f.Add([]byte{2, 2, 2, 0x81, 0x82, 0x83, 0x84, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, seq []byte) {
		// Each byte picks a record: a fixture, its tombstone, or (high
		// bit) a garbage record cut from the sequence itself.
		records := func() [][2][]byte {
			var out [][2][]byte
			for i, c := range seq {
				switch {
				case c&0x80 != 0:
					n := int(c & 0x3f)
					rest := seq[i:]
					k := rest[:min(len(rest), n/2)]
					v := rest[min(len(rest), n/2):min(len(rest), n)]
					out = append(out, [2][]byte{k, v})
				case c&0x40 != 0:
					out = append(out, [2][]byte{fixtures[int(c)%len(fixtures)][0], nil})
				default:
					fx := fixtures[int(c)%len(fixtures)]
					out = append(out, fx)
				}
			}
			return out
		}()
		replay := func() *Catalog {
			c := NewCatalog()
			for _, r := range records {
				before := c.Clone()
				k, _, err := c.Apply(r[0], r[1])
				if err == nil && k.Kind == KindPartition && r[1] != nil {
					ref := PartitionRef{k.Mirror, k.Topic, k.Partition}
					if old, ok := before.Partitions[ref]; ok && c.Partitions[ref].StateEpoch < old.StateEpoch {
						t.Fatalf("%s: state epoch %d replaced by %d", ref.Topic, old.StateEpoch, c.Partitions[ref].StateEpoch)
					}
				}
				if err != nil {
					var ve *VersionError
					if !errors.Is(err, ErrMalformed) && !errors.As(err, &ve) && !errors.Is(err, ErrBadKey) {
						t.Fatalf("record %q=%q: error %v is none of the package's", r[0], r[1], err)
					}
					if !catalogsEqual(before, c) {
						t.Fatalf("record %q=%q failed (%v) and changed the catalog", r[0], r[1], err)
					}
				}
			}
			return c
		}
		if a, b := replay(), replay(); !catalogsEqual(a, b) {
			t.Fatalf("two replays of one sequence built different catalogs")
		}
	})
}

// catalogsEqual compares what a catalog holds.
func catalogsEqual(a, b *Catalog) bool {
	return len(a.Mirrors) == len(b.Mirrors) && len(a.Topics) == len(b.Topics) &&
		len(a.Partitions) == len(b.Partitions) && len(a.Rebuilds) == len(b.Rebuilds) &&
		len(a.Instances) == len(b.Instances) && len(a.HeldACLs) == len(b.HeldACLs) &&
		equalPartitions(a, b)
}

func equalPartitions(a, b *Catalog) bool {
	for ref, pa := range a.Partitions {
		pb, ok := b.Partitions[ref]
		if !ok || pa.StateEpoch != pb.StateEpoch || pa.State != pb.State || pa.LastOffset != pb.LastOffset {
			return false
		}
	}
	return true
}
