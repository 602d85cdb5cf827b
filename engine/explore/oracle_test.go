package explore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// violation is one invariant found broken.
type violation struct {
	inv   string // I1 … I6
	step  int    // the step after which it was found (0: the start, -1: the end)
	msg   string
	known string // the known defect it is, "" for a new finding
}

func (v violation) String() string {
	at := fmt.Sprintf("after step %d", v.step)
	if v.step < 0 {
		at = "at the end"
	}
	s := fmt.Sprintf("%s %s: %s", v.inv, at, v.msg)
	if v.known != "" {
		s += " [known defect: " + v.known + "]"
	}
	return s
}

// knownDefects are symptoms of defects known today and being fixed
// elsewhere, that steps of the default kinds can trigger (those only held
// back kinds trigger are listed with heldBack). They are logged, not
// failed, unless KMIRROR_EXPLORE_KNOWN=fail; docs/reliability.md has a
// seed and steps for each. Remove an entry once its fix is in.
var knownDefects = []struct {
	name    string
	inv     string
	symptom string // a part of the violation's message
}{}

// knownAs is the known defect v's symptom is, "".
func knownAs(inv, msg string) string {
	for _, k := range knownDefects {
		if k.inv == inv && strings.Contains(msg, k.symptom) {
			return k.name
		}
	}
	return ""
}

// oracle checks DESIGN §5.4's invariants against what the clusters hold.
// It keeps its own ledger of every record it ever saw on the destination,
// so a record lost between two looks is noticed however it went.
type oracle struct {
	w *world
	// seen is every explorer record seen on a destination partition,
	// by partition and offset, once.
	seen map[pref]map[int64]map[string]bool
	// stoppedEnd is a STOPPED partition's destination log end when the
	// oracle first saw it STOPPED (I5's baseline).
	stoppedEnd map[pref]int64
	// stopAt is when a topic was last asked to stop, upAt when a held
	// fault was last released (I4 counts from the later of them).
	stopAt map[string]time.Time
	upAt   time.Time

	violations []violation
	known      []violation     // violations of knownDefects, not failed
	reported   map[string]bool // one report per invariant and partition
	// quarantinedN is how many records the last look found quarantined.
	quarantinedN int
}

func newOracle(w *world) *oracle {
	return &oracle{w: w, seen: map[pref]map[int64]map[string]bool{}, stoppedEnd: map[pref]int64{},
		stopAt: map[string]time.Time{}, reported: map[string]bool{}}
}

func (o *oracle) stopAsked(topics []string) {
	for _, t := range topics {
		o.stopAt[t] = time.Now()
	}
}

// report records a violation once per invariant and subject.
func (o *oracle) report(inv, subject, format string, args ...any) {
	key := inv + " " + subject
	if o.reported[key] {
		return
	}
	o.reported[key] = true
	step := o.w.stepNo
	if o.w.final {
		step = -1
	}
	v := violation{inv: inv, step: step, msg: subject + ": " + fmt.Sprintf(format, args...)}
	if v.known = knownAs(inv, v.msg); v.known != "" && !o.w.strictKnown {
		o.known = append(o.known, v)
		return
	}
	o.violations = append(o.violations, v)
}

// check reads both clusters and checks I1, I2, I3 and I5 (settle checks
// I4 and I6, which are about time). Partitions it cannot read now (a
// broker held down) are checked at a later step.
func (o *oracle) check() {
	w := o.w
	cat := w.catalog()
	if cat == nil {
		return // __mirror_state unreadable (a destination broker down): next time
	}
	recs := persisted(cat)
	views := map[pref]logView{}
	for _, t := range topicNames {
		for _, pi := range w.dst.PartitionInfos(t) {
			p := pi.Partition
			r := pref{t, p}
			ctx, cancel := w.timeout(10 * time.Second)
			v, err := readLog(ctx, w.dstCl, t, p)
			cancel()
			if err == nil {
				views[r] = v
				o.record(r, v)
			}
		}
	}
	q, err := w.quarantined(cat)
	if err != nil {
		return
	}
	o.quarantinedN = 0
	for _, vals := range q {
		o.quarantinedN += len(vals)
	}
	for r := range o.seen {
		if v, ok := views[r]; ok || w.dst.TopicInfo(r.topic) == nil {
			o.checkKept(r, v, q[r.topic], cat)
		}
	}
	for r, rec := range recs {
		v, ok := views[r]
		if !ok {
			continue
		}
		if rec.State != partition.Stopped {
			delete(o.stoppedEnd, r)
			continue
		}
		var src *logView
		ctx, cancel := w.timeout(3 * time.Second)
		if sv, err := readLog(ctx, w.srcCl, r.topic, r.p); err == nil {
			src = &sv
		}
		cancel()
		o.checkStopped(r, rec, v, src)
	}
	o.checkMirroring(views)
}

// record adds a destination partition's records to the ledger.
func (o *oracle) record(r pref, v logView) {
	if o.seen[r] == nil {
		o.seen[r] = map[int64]map[string]bool{}
	}
	for _, rec := range v.records {
		if !strings.HasPrefix(rec.value, srcValue) && !strings.HasPrefix(rec.value, foreignValue) {
			continue // kmirror's own fillers
		}
		if o.seen[r][rec.offset] == nil {
			o.seen[r][rec.offset] = map[string]bool{}
		}
		o.seen[r][rec.offset][rec.value] = true
	}
}

// checkKept is I2: every record the ledger saw on the partition is still
// there at its offset, or in one of the topic's quarantines. While a
// rebuild of the topic is under way, or a cluster is held down, records
// may be missing for a while: the check waits for a quiet step.
func (o *oracle) checkKept(r pref, v logView, q map[string]bool, cat *store.Catalog) {
	w := o.w
	if w.faultHeld() || rebuilding(cat, r.topic) || len(w.running()) == 0 {
		return
	}
	var lost []string
	foreign, below := 0, 0
	srcStart := int64(-1)
	for _, off := range sortedKeys(o.seen[r]) {
		for val := range o.seen[r][off] {
			if v.at[off] == val || q[val] {
				continue
			}
			lost = append(lost, fmt.Sprintf("%d:%s", off, val))
			if strings.HasPrefix(val, foreignValue) {
				foreign++
			}
			if srcStart < 0 {
				srcStart = o.sourceStart(r)
			}
			if off < srcStart {
				below++
			}
		}
	}
	if len(lost) == 0 {
		return
	}
	topicState := "present"
	if w.dst.TopicInfo(r.topic) == nil {
		topicState = "missing"
	}
	o.report("I2", r.String(), "%d records seen on the destination are neither there nor in a quarantine "+
		"(%d destination-only, %d below the source's log start %d; destination topic %s, log %d..%d): %s",
		len(lost), foreign, below, srcStart, topicState, v.start, v.end, clip(lost, 8))
}

// sourceStart is a source partition's log start, -1 unknown.
func (o *oracle) sourceStart(r pref) int64 {
	ctx, cancel := o.w.timeout(3 * time.Second)
	defer cancel()
	offs, err := o.w.srcAdm.ListStartOffsets(ctx, r.topic)
	if err != nil {
		return -1
	}
	lo, ok := offs.Lookup(r.topic, r.p)
	if !ok || lo.Err != nil {
		return -1
	}
	return lo.Offset
}

// checkStopped is I3 and I5 for a STOPPED partition: its LME is the
// offset of its last source record on the destination, and nothing of
// kmirror's lands there after it is STOPPED (records the explorer writes
// as a client of B do).
//
// The last source record may be a transaction marker mirrored from the
// source (src, the source's view, says which markers are the source's;
// nil: the source cannot be read, and a marker after the last data record
// passes too).
func (o *oracle) checkStopped(r pref, rec store.PartitionRecord, v logView, src *logView) {
	// Between the last data record and the last marker the source has too,
	// either end is right: a marker the stop wrote (its abort of an open
	// mirrored transaction) may meet one the source wrote later at the
	// same offset (its own abort on a timeout), and the stop cannot know.
	last, _ := v.lastMirrored(src)
	data := v.lastSourceRecord()
	ok := rec.LastOffset == data || (last < 0 && rec.LastOffset < v.start) ||
		(rec.LastOffset > data && rec.LastOffset <= last)
	if ok && rec.LastOffset != data && last >= 0 {
		// A marker in between: the destination's, at an offset where the
		// source has one too (a mirrored commit or abort).
		b := v.batchAt(rec.LastOffset)
		ok = b != nil && b.Header.IsControl() && b.Header.BaseOffset == rec.LastOffset
		if ok && src != nil && rec.LastOffset >= src.start {
			s := src.batchAt(rec.LastOffset)
			ok = s != nil && s.Header.IsControl() && s.Header.BaseOffset == rec.LastOffset
		}
	}
	if !ok {
		what := "no batch"
		if b := v.batchAt(rec.LastOffset); b != nil {
			switch {
			case b.Header.IsControl():
				what = "a transaction marker"
			case b.Header.IsTransactional():
				what = "a transactional batch"
			default:
				what = "a data batch"
			}
		}
		if val, ok := v.at[rec.LastOffset]; ok && strings.HasPrefix(val, foreignValue) {
			what = "a foreign record"
		}
		srcTail := "unreadable"
		if src != nil {
			srcTail = src.tail(4)
		}
		o.report("I3", r.String(), "STOPPED with LME %d (%s there), but the last source record on the destination is at %d (log %d..%d; destination ends %s; source ends %s)",
			rec.LastOffset, what, last, v.start, v.end, v.tail(4), srcTail)
	}
	base, ok := o.stoppedEnd[r]
	if !ok {
		o.stoppedEnd[r] = v.end
		return
	}
	for _, b := range v.batches {
		if b.Header.NextOffset() <= base {
			continue
		}
		if b.Header.IsControl() {
			o.report("I5", r.String(), "a transaction marker at %d, after the partition was STOPPED at log end %d", b.Header.BaseOffset, base)
			return
		}
	}
	for _, x := range v.records {
		if x.offset >= base && !strings.HasPrefix(x.value, foreignValue) {
			o.report("I5", r.String(), "record %q at %d, not written by a client of the destination, after the partition was STOPPED at log end %d",
				x.value, x.offset, base)
			return
		}
	}
}

// checkMirroring is I1: a MIRRORING partition that caught up holds the
// source's batches at the same offsets over the range both hold. A
// difference right after a foreign write or a destination abort is the
// engine's to find at its next append: it counts only if the partition is
// still MIRRORING with the difference a while later.
func (o *oracle) checkMirroring(views map[pref]logView) {
	w := o.w
	if w.m.srcDown {
		return
	}
	for r, s := range w.live() {
		d, ok := views[r]
		if !ok || s.State != partition.Mirroring {
			continue
		}
		diff := o.diff(r, d)
		if diff == "" {
			continue
		}
		held, _ := w.wait(15*time.Second, func() (bool, string) {
			if st, ok := w.live()[r]; !ok || st.State != partition.Mirroring {
				return true, ""
			}
			ctx, cancel := w.timeout(10 * time.Second)
			defer cancel()
			d, err := readLog(ctx, w.dstCl, r.topic, r.p)
			return err == nil && o.diff(r, d) == "", ""
		})
		if !held {
			o.report("I1", r.String(), "MIRRORING, but %s", diff)
		}
	}
}

// diff compares a destination partition with its source, "" when they
// agree (or the source cannot be read).
func (o *oracle) diff(r pref, d logView) string {
	ctx, cancel := o.w.timeout(10 * time.Second)
	defer cancel()
	s, err := readLog(ctx, o.w.srcCl, r.topic, r.p)
	if err != nil {
		return ""
	}
	return sameBatches(s, d)
}

func sortedKeys[V any](m map[int64]V) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// clip joins at most n items, saying how many more there were.
func clip(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" … and %d more", len(items)-n)
}

// ledgerSummary counts the ledger's records, for the scenario's log line.
func (o *oracle) ledgerSummary() string {
	src, foreign := 0, 0
	for _, offs := range o.seen {
		for _, vals := range offs {
			for v := range vals {
				if strings.HasPrefix(v, foreignValue) {
					foreign++
				} else {
					src++
				}
			}
		}
	}
	return fmt.Sprintf("ledger: %d source and %d foreign records seen on the destination, %d quarantined", src, foreign, o.quarantinedN)
}
