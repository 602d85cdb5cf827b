package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/fetch"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/txn"
)

// runner owns one mirrored partition: its position, its writer identity and
// its state. Everything it owns is touched only by its goroutine; what others
// may read is copied into stats, which the runner writes and never reads
// back (what others hand it comes through its inbox).
type Runner struct {
	deps      *Deps
	topic     string
	partition int32
	openTxns  int32 // open mirrored transactions last persisted
	stats     *Stats
	in        inbox
	persist   *StateSink // nil: nothing is persisted

	st   partition.Status
	work partition.Action // the work action in progress or due, nil when idle

	src Route // source leader, epoch and topic id
	dst Route // destination leader and topic id

	position
	attempt int16 // consecutive transient failures inside MIRRORING, for backoff
	// outstanding: a want is at the fetcher (kept here, next to
	// attempt, where it costs no padding)
	outstanding bool
	parking     bool // the loop is to park the runner (park.go)
	starting    bool // the runner holds a start slot (starter)
	fenced      bool // the writer is its topic's in this instance, which bumped it (initWriter): every earlier owner is fenced
	// sendGen is the generation of the runner's appends (Append's
	// Gen): a resend or an alignment moves it on, lifting the mute a
	// failed append put on the partition in its sink.
	sendGen uint32
	writer  batch.Writer

	inflight []inflight // issued batches, oldest first

	gen      uint64 // bumps whenever outstanding fetches become stale
	maxBytes int32

	txm       *txn.Mapper   // mirrored transactions; created at the first alignment
	alignedAt time.Duration // when the destination log end was last read by alignment (Deps.SinceBase)
	ackMark   int64         // acked when the last destination check was taken...
	ackMarkAt time.Duration // ...at this time (sinceBase): a lower bound of what was acked before the next check was read
	srcHWM    int64         // source high watermark from the last fetch answer, -1 before the first
	rare      *runnerRare   // nil until needed

	// tc is the runner's topic: its context, for the goroutine a wake
	// starts (park.go), and the count of its runners still running,
	// until this one exits.
	tc *TopicCancel
}

// position is where a runner stands on its partition. Only the runner's
// goroutine reads or writes it; what others see of it (the snapshot, the
// watcher, another partition's rebuild) is what the runner publishes in
// its stats.
type position struct {
	pos      int64 // next offset to append: destination log end once in-flight batches land
	acked    int64 // destination log end confirmed by the broker
	fillTo   int64 // alignment decided to fill up to here before mirroring
	deleteTo int64 // then move the destination log start here (the source's)
	// mirrored is the last mirrored offset (the LME), -1 none, and
	// mirroredEpoch its source epoch, -1 unknown: what the partition
	// record checkpoints and the next alignment starts from.
	mirrored      int64
	lastEpoch     int32 // source leader epoch of the last fetched batch
	mirroredEpoch int32
}

// restore takes the last mirrored offset and epoch, and the epoch lineage,
// persisted by an earlier owner; -1 means none.
func (r *Runner) restore(lastOffset int64, lastEpoch int32, lineage []EpochStart) {
	if lastOffset >= 0 {
		r.mirrored, r.mirroredEpoch = lastOffset, lastEpoch
	}
	r.stats.restore(lastOffset, lastEpoch, lineage)
}

// landed records one batch on the destination, ending before end; epoch
// -1 marks a filler, which mirrors nothing.
func (r *Runner) landed(base, end int64, epoch int32, bytes int64, maxTs int64, filler bool) {
	if !filler {
		r.mirrored, r.mirroredEpoch = end-1, epoch
	}
	r.stats.appended(base, end, epoch, bytes, maxTs, filler)
}

// verifiedTo moves the last mirrored offset up to last, of source epoch
// epoch, whose first verified batch starts at epochStart: the destination's
// batches up to it are identical to the source's.
func (r *Runner) verifiedTo(last int64, epoch int32, epochStart int64) {
	if last > r.mirrored {
		r.mirrored, r.mirroredEpoch = last, epoch
	}
	r.stats.verified(last, epoch, epochStart)
}

// forgetMirrored clears the last mirrored offset, epoch and lineage: the
// destination topic was rebuilt by kmirror and holds none of them any more.
func (r *Runner) forgetMirrored() {
	r.mirrored, r.mirroredEpoch = -1, -1
	r.stats.forgetPosition()
}

// runnerRare is what few runners need, kept apart so that thousands of
// idle runners do not each carry it.
type runnerRare struct {
	retry        *time.Timer    // the retry the state machine asked for, nil when none
	restoredTxns []txn.Producer // from the partition record, for the first alignment
	failbackFrom string         // the forward mirror this partition fails back from, once found
	// stopAborted are the first offsets of the mirrored transactions the
	// stop aborted (kept in the partition record: a failback's rebuild
	// quarantines from there).
	stopAborted []int64
	// stopEarlierWriter is the producer id of the partition's record when
	// a stop that never aligned first ran: its batches above the last
	// checkpoint are the mirror's, also on a retry of the stop.
	stopEarlierWriter int64
	// stopTxnPIDs are the mapped producer ids of the mirrored
	// transactions open when a stop that never aligned first ran: their
	// data above the last checkpoint is the mirror's (settleLME), also on
	// a retry of the stop, after its aborts closed them.
	stopTxnPIDs []int64
}

// rarely returns the runner's rarely needed fields, allocating them.
func (r *Runner) rarely() *runnerRare {
	if r.rare == nil {
		r.rare = new(runnerRare)
	}
	return r.rare
}

// openTxnProducers are the partition's open mirrored transactions: its
// mapper's, or before it has one those of the partition record.
func (r *Runner) openTxnProducers() []txn.Producer {
	if r.txm != nil {
		return r.txm.Open()
	}
	return r.restoredTxns()
}

// restoredTxns are the mirrored transactions of the partition record, until
// the first alignment takes them.
func (r *Runner) restoredTxns() []txn.Producer {
	if r.rare == nil {
		return nil
	}
	return r.rare.restoredTxns
}

// dropFetch abandons the outstanding fetch, if any: its answer will carry a
// stale generation and be ignored.
func (r *Runner) dropFetch() {
	r.gen++
	r.outstanding = false
}

// fetchPos is where the next fetch starts: the destination position, or the
// source log start while the batch holding it is still to be copied (a fetch
// below the log start is out of range even inside that batch).
func (r *Runner) fetchPos() int64 { return max(r.pos, r.deleteTo) }

// postWant asks the partition's fetcher for records from offset: naming
// the epoch of the last batch appended when offset follows it, and none
// otherwise (a fetch from the source's log start past a gap).
func (r *Runner) postWant(ctx context.Context, offset int64) {
	epoch := r.lastEpoch
	if offset != r.pos {
		epoch = -1
	}
	r.post(ctx, offset, epoch)
}

// post asks the partition's fetcher for records from offset, lastEpoch
// being the source epoch of the batch before it, for MIRRORING: while the
// source has nothing new there the fetcher keeps the want in its fetch
// session rather than answer it.
func (r *Runner) post(ctx context.Context, offset int64, lastEpoch int32) {
	r.postAs(ctx, offset, lastEpoch, r.attempt > 0)
}

// postAs is post; mustAnswer asks for an answer even when it is empty.
func (r *Runner) postAs(ctx context.Context, offset int64, lastEpoch int32, mustAnswer bool) {
	f := r.deps.Source.Fetcher(r.src.Leader, r.topic, r.partition)
	w := fetch.Want[*Runner]{
		TopicID: r.src.TopicID, Partition: r.partition,
		Offset: offset, LeaderEpoch: r.src.Epoch, LastEpoch: lastEpoch,
		MaxBytes: r.maxBytes, Gen: r.gen, To: r,
		Behind:     offset < r.srcHWM || r.srcHWM < 0,
		MustAnswer: mustAnswer,
	}
	if f.Post(ctx, w) {
		r.outstanding = true
	}
}

// startMirroring fills and trims the destination as alignment decided and
// asks for the first records.
func (r *Runner) startMirroring(ctx context.Context) error {
	if r.pos < r.fillTo {
		if err := r.fill(ctx, r.fillTo); err != nil {
			return err
		}
	}
	if err := r.maybeDelete(ctx); err != nil {
		return err
	}
	if !r.outstanding {
		r.postWant(ctx, r.fetchPos())
	}
	return nil
}

// mirrorNext waits for one thing to happen while MIRRORING and handles it:
// fetch ahead, transform and append in order. An idle partition spends its
// life blocked here, so this frame and those below it (run, doFetching,
// fetching) are kept small, the work being done in functions called after
// the wait: the runtime then shrinks the idle goroutine's stack from 8 KiB
// to 4 KiB (it does so only for a goroutine using under a quarter of its
// stack, counting 800 bytes of guard).
func (r *Runner) mirrorNext(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.endWaiting() {
		return r.checkEnd()
	}
	if err := r.takeFault(); err != nil {
		return err
	}
	if r.takeCheckpoint() {
		r.checkpoint()
	}
	if r.eventPending() {
		return errInterrupted
	}
	if r.oldestAcked() { // settled first: it makes room for the next appends
		return r.interruptible(ctx, r.completeOldest)
	}
	if pending, empty := r.resultPending(); pending {
		if empty { // an idle long-poll's answer: only a want to post again
			return r.takeFetch(ctx)
		}
		return r.interruptible(ctx, r.takeFetch)
	}
	if len(r.inflight) == 0 {
		// Idle: the runner parks (the end of ctx wakes it too, see
		// topicCancel), and its next goroutine looks into the inbox.
		// An idle partition keeps no in-flight array.
		r.inflight = nil
		r.parking = true
		return errParked
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.oldestDone():
		return r.interruptible(ctx, r.completeOldest)
	case <-r.wakeChan():
		r.woke()
		return nil
	}
}

// takeFetch handles the fetcher's answer waiting in the inbox.
func (r *Runner) takeFetch(ctx context.Context) error {
	var res fetch.Result
	if !r.takeResult(&res) {
		return nil
	}
	return r.onFetch(ctx, &res)
}

// completeOldest settles the oldest in-flight batch, which has its answer.
func (r *Runner) completeOldest(ctx context.Context) error {
	return r.completeHeld(ctx, r.popInflight())
}

// checkEnd compares the destination log end last observed by the watcher
// with what the runner appended.
func (r *Runner) checkEnd() error {
	o, ok := r.takeEnd()
	if !ok {
		return nil
	}
	if r.txm != nil {
		r.txm.ReleaseIdle(r.deps.Now(), idleTxnProducer)
	}
	mark, markAt := r.ackMark, r.ackMarkAt
	r.ackMark, r.ackMarkAt = r.acked, r.deps.SinceBase(r.deps.Now())
	at := o.at
	switch {
	case at < r.alignedAt:
		// observed before the last alignment: says nothing now
	case o.end > r.pos:
		// pos only grows, so the end read earlier is beyond it then too.
		return r.foreignWrite(r.pos, o.end, "its log end, by the destination check")
	case markAt >= r.alignedAt && markAt < at && o.end < mark:
		// The destination lost acknowledged records: the topic was
		// deleted and recreated (a rebuild) or truncated. Align again.
		// Compared with what was acked before the end was read, not
		// with acked now: an append acknowledged after the broker
		// answered the check is not a loss.
		return fmt.Errorf("%w: destination log end %d is below the %d records already mirrored", errRealign, o.end, mark)
	}
	return nil
}

// onFetch handles a fetcher's answer and asks for more.
func (r *Runner) onFetch(ctx context.Context, res *fetch.Result) error {
	if res.Gen != r.gen {
		return nil // answer to a fetch abandoned by a realignment
	}
	r.outstanding = false
	if err := r.handleFetch(ctx, *res); err != nil {
		return err
	}
	if !r.outstanding { // appending needed the fetcher for itself
		r.postWant(ctx, r.fetchPos())
	}
	return nil
}

// handleFetch appends the batches of one fetch answer.
func (r *Runner) handleFetch(ctx context.Context, res fetch.Result) error {
	if res.Err != nil {
		return r.fetchFailed(ctx, res.Err)
	}
	if r.attempt > 0 {
		r.attempt = 0
		r.stats.clearError()
	}
	r.stats.SetSource(res.HWM, res.LogStart)
	r.srcHWM = res.HWM
	if res.Divergence != nil {
		// The source answered LastFetchedEpoch with the point where its log
		// left ours: it lost mirrored records (an unclean election).
		return &ULEError{Topic: r.topic, Partition: r.partition, Epoch: res.Divergence.Epoch, SourceEnd: res.Divergence.EndOffset, Mirrored: r.pos}
	}
	type item struct {
		h batch.Header
		b []byte
	}
	var items []item
	partialAt, err := batch.Split(res.Records, func(h batch.Header, b []byte) error {
		items = append(items, item{h, b})
		return nil
	})
	if err != nil {
		return r.Failuref("%w at fetch offset %d: %w", ErrBadSourceBatch, res.Offset, err)
	}
	next, nextEpoch := res.Offset, r.lastEpoch
	if n := len(items); n > 0 {
		next = max(next, items[n-1].h.NextOffset())
		nextEpoch = items[n-1].h.LeaderEpoch
		r.stats.setSourceNewest(items[n-1].h.MaxTimestamp)
		r.sizeFetches(len(res.Records), items[0].h.BaseOffset, next, res.HWM, res.RTT)
	} else if partialAt >= 0 {
		// One batch is larger than we asked for: ask for more next time.
		r.maxBytes = min(r.maxBytes*2, 64<<20)
	} else if len(r.inflight) == 0 {
		// Nothing new and nothing in flight: an idle partition keeps no
		// in-flight array.
		r.inflight = nil
	}
	// Fetch ahead while we append. The want names the epoch of the last
	// batch fetched, not of the last appended: after a leader change a
	// broker would take the older epoch, which ends before next, for a
	// divergence (KIP-320).
	r.post(ctx, next, nextEpoch)
	for _, it := range items {
		if err := r.appendBatch(ctx, it.h, it.b, fetch.ArrivedAt(res.At)); err != nil {
			// The fetch posted ahead starts after this answer: the
			// batches not appended would never be fetched again.
			// Whatever comes next (an operator event's step, an
			// alignment) fetches from where the appends stopped.
			r.dropFetch()
			return err
		}
	}
	return nil
}

// maxGrownFetchBytes caps how far sizeFetches grows a partition's fetches.
const maxGrownFetchBytes = 8 << 20

// fetchRateGoal is the rate, in bytes per second, that a partition's
// fetches are sized for: one fetch a round trip, so a fetch may grow to
// what this rate moves in one round trip to the source (up to
// maxGrownFetchBytes). At 50 ms that is the cap; under 4 ms it is less
// than the configured 1 MiB, so on a near source fetches keep that size.
const fetchRateGoal = 256 << 20

// grownFetchLimit is how far, in bytes, a partition's fetches may grow
// when the round trip to its source broker is rtt (0: not known, no
// growth).
func grownFetchLimit(rtt time.Duration) float64 {
	return min(rtt.Seconds()*fetchRateGoal, maxGrownFetchBytes)
}

// sizeFetches sizes the partition's next fetches after an answer of n
// bytes, holding offsets from first to next, the source's high watermark
// being hwm, its fetcher's round trip to the source broker rtt (0: not
// known). A partition has one fetch at a time, so it moves at most a
// fetch per round trip to the source: one still behind after an answer
// that filled half its size asks for twice as much next time, or at once
// for what it is behind by (estimated at the answer's bytes per offset),
// up to grownFetchLimit(rtt); so across a WAN the fetches grow towards the
// bandwidth-delay product without a round trip per doubling, and on a near
// source they stay at the configured size: the next fetch is a short round
// trip away, and a larger one costs both ends memory and copying (an
// in-memory broker copies a fetch answer again for each batch it adds).
// Once caught up it goes back to the configured size.
func (r *Runner) sizeFetches(n int, first, next, hwm int64, rtt time.Duration) {
	base := r.deps.FetchBytes
	switch behind := next < hwm; {
	case behind && n >= int(r.maxBytes)/2:
		grown := float64(r.maxBytes) * 2
		if span := next - first; span > 0 {
			grown = max(grown, float64(hwm-next)*float64(n)/float64(span))
		}
		r.maxBytes = max(r.maxBytes, int32(min(grown, grownFetchLimit(rtt))))
	case !behind && r.maxBytes > base && n < int(base):
		r.maxBytes = base
	}
}

// fetchFailed handles a fetch error: leader changes and connection loss are
// retried with backoff after fresh metadata; an out-of-range offset sends the
// partition back to alignment.
func (r *Runner) fetchFailed(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, kerr.OffsetOutOfRange):
		return fmt.Errorf("%w: %w", errRealign, err)
	case Retriable(err):
		r.attempt++
		if r.attempt > maxRealigns {
			return &PartitionError{Topic: r.topic, Partition: r.partition, Retryable: true, Err: err}
		}
		r.retrying(err.Error())
		at := r.deps.Now()
		if !r.wait(ctx, r.backoff()) {
			return nil
		}
		if rt, rerr := r.deps.Source.Route(ctx, r.topic, r.partition, at); rerr == nil {
			r.src = rt
		}
		r.postWant(ctx, r.fetchPos())
		return nil
	}
	return r.Failure(err)
}

// appendBatch checks one source batch against the destination position,
// rewrites it for its writer identity and appends it; fetchedAt is when the
// fetch answer holding it arrived.
func (r *Runner) appendBatch(ctx context.Context, h batch.Header, b []byte, fetchedAt time.Time) error {
	switch {
	case h.NextOffset() <= r.pos:
		return nil // already on the destination (the fetch began inside it)
	case h.BaseOffset < r.pos:
		return r.mismatch(h.BaseOffset, r.pos, ErrDiverged)
	}
	if err := batch.VerifyCRC(b); err != nil {
		return r.Failuref("%w: %w", ErrBadSourceBatch, err)
	}
	if h.BaseOffset > r.pos {
		if err := r.fillGap(ctx, h.BaseOffset, h.BaseTimestamp); err != nil {
			return err
		}
	}
	r.lastEpoch = h.LeaderEpoch
	if h.IsControl() {
		return r.appendControl(ctx, h, b)
	}
	if h.HasGap() {
		nb, err := r.rebuildGapBatch(h, b)
		if err != nil {
			return err
		}
		b = nb
	}
	if err := r.makeRoom(ctx); err != nil {
		return err
	}
	if err := r.throttle(ctx, len(b)); err != nil {
		return err
	}
	var f inflight
	if h.IsTransactional() {
		var err error
		if f, err = r.issueTxn(ctx, h, b); err != nil {
			return err
		}
	} else {
		f = r.issue(ctx, b, h.BaseOffset, h.LastOffsetDelta+1, h.LeaderEpoch, h.MaxTimestamp)
	}
	f.fetchedAt = fetchedAt
	r.inflight = append(r.inflight, f)
	r.pos = h.NextOffset()
	return nil
}

// throttle waits as mirror.replication.throttled.rate requires before n
// more bytes are appended.
func (r *Runner) throttle(ctx context.Context, n int) error {
	if r.deps.Bucket == nil {
		return nil
	}
	if d := r.deps.Bucket.Reserve(n); d > 0 && !r.wait(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// makeRoom waits for the oldest in-flight batch when the pipeline is full.
func (r *Runner) makeRoom(ctx context.Context) error {
	if len(r.inflight) < r.deps.MaxInFlight {
		return nil
	}
	return r.completeHeld(ctx, r.popInflight())
}

// popInflight removes the oldest in-flight batch, clearing its slot so the
// backing array does not keep its response alive.
func (r *Runner) popInflight() inflight {
	f := r.inflight[0]
	r.inflight[0] = inflight{}
	r.inflight = r.inflight[1:]
	return f
}

// oldestAcked reports whether the oldest in-flight batch has its answer.
func (r *Runner) oldestAcked() bool {
	select {
	case <-r.oldestDone():
		return true
	default:
		return false
	}
}

// oldestDone is closed when the oldest in-flight batch has its answer, or
// could not be sent (it is resent at once); nil (never ready) when nothing
// is in flight.
func (r *Runner) oldestDone() <-chan struct{} {
	if len(r.inflight) == 0 {
		return nil
	}
	if r.inflight[0].call == nil {
		return closedChan
	}
	return r.inflight[0].call.Done()
}

// closedChan is always ready.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
