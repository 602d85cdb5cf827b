package replica

import (
	"reflect"
	"testing"
	"time"
)

// TestRateFromCounters: the first update after a partition starts only
// takes its counters; later ones divide what was appended since by the
// time since the mirror's last update.
func TestRateFromCounters(t *testing.T) {
	s := NewStats("a-to-b", "t", 0)
	s.appended(0, 10, 0, 4000, 0, false)
	s.UpdateRate(0)
	if ps := s.Snapshot(); ps.BytesPerSec != 0 || ps.BatchesPerSec != 0 {
		t.Fatalf("rate %v B/s, %v batches/s at the first update, want none", ps.BytesPerSec, ps.BatchesPerSec)
	}
	s.appended(10, 20, 0, 3000, 0, false)
	s.appended(20, 30, 0, 3000, 0, false)
	s.UpdateRate(2 * time.Second)
	if ps := s.Snapshot(); ps.BytesPerSec != 3000 || ps.BatchesPerSec != 1 {
		t.Fatalf("rate %v B/s, %v batches/s, want 3000 and 1", ps.BytesPerSec, ps.BatchesPerSec)
	}
	s.UpdateRate(time.Second)
	if ps := s.Snapshot(); ps.BytesPerSec != 0 {
		t.Fatalf("rate %v B/s with nothing appended, want 0", ps.BytesPerSec)
	}
}

// TestSnapshotCopiesEveryPublishedField: a Stats keeps a published, not a
// PartitionSnapshot, so a field added to one and not the other, or not
// copied by Snapshot, would read as zero. Every published field is set
// to a value of its own and must come out of Snapshot under its name;
// every snapshot field must be published or be one of those others fill.
func TestSnapshotCopiesEveryPublishedField(t *testing.T) {
	notPublished := map[string]bool{
		"Mirror": true, "Topic": true, // names
		"Owner": true, "Progress": true, "RecordsPerSec": true, // the engine's
		"Lag": true, "LagTime": true, // derived
		"LagAtContact": true, // the engine's, while the source does not answer
	}
	s := NewStats("a-to-b", "orders", 0)
	pv := reflect.ValueOf(&s.ps).Elem()
	for i := range pv.NumField() {
		f, v := pv.Type().Field(i), pv.Field(i)
		if !f.IsExported() {
			continue
		}
		switch k := v.Kind(); {
		case k == reflect.Int8: // a state or a cause
			v.SetInt(int64(1 + i%4))
		case k == reflect.Int || k == reflect.Int16 || k == reflect.Int32 || k == reflect.Int64:
			v.SetInt(int64(100 + i))
		case k == reflect.Uint16 || k == reflect.Uint32:
			v.SetUint(uint64(100 + i))
		case k == reflect.Bool:
			v.SetBool(true)
		case k == reflect.Float64:
			v.SetFloat(float64(100 + i))
		case k == reflect.String:
			v.SetString(f.Name)
		case k == reflect.Slice:
			v.Set(reflect.ValueOf([]EpochStart{{Epoch: 3, StartOffset: 7}}))
		case k == reflect.Struct:
			v.Set(reflect.ValueOf(time.Unix(int64(i), 0)))
		default:
			t.Fatalf("published.%s is a %s the test does not know how to set", f.Name, v.Kind())
		}
	}
	snap := reflect.ValueOf(s.Snapshot())
	for i := range pv.NumField() {
		f := pv.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		got := snap.FieldByName(f.Name)
		if !got.IsValid() {
			t.Errorf("published.%s has no PartitionSnapshot field of its name", f.Name)
			continue
		}
		if !reflect.DeepEqual(got.Interface(), pv.Field(i).Interface()) {
			t.Errorf("Snapshot gives %s = %v, published holds %v", f.Name, got.Interface(), pv.Field(i).Interface())
		}
	}
	for i := range snap.NumField() {
		name := snap.Type().Field(i).Name
		if _, ok := pv.Type().FieldByName(name); !ok && !notPublished[name] {
			t.Errorf("PartitionSnapshot.%s is neither published by a Stats nor filled by others", name)
		}
	}
	if ps := s.Snapshot(); ps.Mirror != "a-to-b" || ps.Topic != "orders" {
		t.Errorf("snapshot names mirror %q, topic %q, want a-to-b and orders", ps.Mirror, ps.Topic)
	}
}
