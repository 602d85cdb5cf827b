package bench

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/batch"
)

// dataset is the source topic every copy phase reads.
type dataset struct {
	layout
	partitions  int32
	ends        []int64 // log end offset by partition (the log starts at 0)
	records     int64
	recordBytes int64 // key and value bytes as produced (uncompressed)
	wireBytes   int64 // bytes of the compressed batches as stored and fetched
	batches     int64
	produceTime time.Duration
}

// valuePool is how many distinct record values the generator cycles
// through. It is larger than the records of one batch, so no value repeats
// inside a batch and the codec sees realistic redundancy, not copies.
const valuePool = 8192

// recordValues returns valuePool JSON-like values of about size bytes:
// repeated field names and enumerations (compressible like real events)
// a random token (incompressible) and free text from a small vocabulary,
// so zstd gets about 3x.
func recordValues(size int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	events := []string{"page_view", "add_to_cart", "checkout", "search", "login", "logout", "click", "purchase"}
	countries := []string{"DE", "FR", "US", "GB", "JP", "BR", "IN", "NL", "SE", "ES"}
	agents := []string{
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
	}
	// Free text from a small vocabulary, like a description or log line.
	words := strings.Fields(`the order was shipped from warehouse to customer after payment confirmed by
		bank card wallet transfer with express standard delivery option selected and discount code applied on
		items in cart including shoes shirt jacket phone case cable charger book lamp chair table coffee tea
		returned refunded cancelled pending processing delayed arrived signed`)
	out := make([][]byte, valuePool)
	for i := range out {
		tok := make([]byte, 96)
		for j := range tok {
			tok[j] = byte(rng.Uint32())
		}
		v := fmt.Appendf(nil, `{"id":%d,"ts":"2026-03-%02dT%02d:%02d:%02d.%03dZ","user":"user-%06d","session":"%016x%016x",`+
			`"event":%q,"page":"/catalog/%d/item/%d","referrer":"https://www.example.com/search?q=item-%d&page=%d",`+
			`"ua":%q,"geo":{"country":%q,"lat":%.4f,"lon":%.4f},"cart":[{"sku":"SKU-%05d","qty":%d,"price":%.2f},`+
			`{"sku":"SKU-%05d","qty":%d,"price":%.2f}],"token":%q,"pad":"`,
			i, 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1000), rng.IntN(200_000),
			rng.Uint64(), rng.Uint64(), events[rng.IntN(len(events))], rng.IntN(50), rng.IntN(10_000),
			rng.IntN(10_000), rng.IntN(20), agents[rng.IntN(len(agents))], countries[rng.IntN(len(countries))],
			rng.Float64()*180-90, rng.Float64()*360-180, rng.IntN(100_000), 1+rng.IntN(5), rng.Float64()*200,
			rng.IntN(100_000), 1+rng.IntN(5), rng.Float64()*200, base64.StdEncoding.EncodeToString(tok))
		for len(v) < size-2 {
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, ' ')
		}
		v = v[:size-2]
		out[i] = append(v, `"}`...)
	}
	return out
}

// datasetBatchBytes is the size of the data set's batches before
// compression.
const datasetBatchBytes = 1 << 20

// produceDataset writes records to a new topic in full batches of about
// datasetBatchBytes before compression, like a busy production topic's,
// until about size bytes of compressed batches are on the source: the data
// set is sized by what a mirror moves, not by what the records weigh
// unpacked. The batches are built here, not by a lingering producer, so
// their size does not depend on how fast the machine ran the load: it sets
// what any client can append per Produce round trip (one batch per
// partition per request).
func produceDataset(ctx context.Context, cl *kgo.Client, topic string, partitions int32, codec kgo.CompressionCodec, size int64, recordSize int) (dataset, error) {
	l, err := createTopic(ctx, cl, topic, partitions, nil)
	if err != nil {
		return dataset{}, err
	}
	values := recordValues(recordSize, 1)
	perBatch := max(1, datasetBatchBytes/(recordSize+len("user-000000")))
	var (
		written atomic.Int64 // compressed bytes appended
		records atomic.Int64
		bytes   atomic.Int64 // key and value bytes
	)
	start := time.Now()
	err = forEachPartition(ctx, partitions, func(ctx context.Context, p int32) error {
		recs := make([]batch.Record, perBatch)
		// Every partition gets at least one batch.
		for n := int64(p) * int64(perBatch); ; n += int64(partitions) * int64(perBatch) {
			var raw int64
			for i := range recs {
				recs[i] = batch.Record{Key: fmt.Appendf(nil, "user-%06d", (n+int64(i))%100_003), Value: values[(n+int64(i))%valuePool]}
				raw += int64(len(recs[i].Key) + len(recs[i].Value))
			}
			b, err := batch.Build(codec, time.Now().UnixMilli(), anonymousWriter, recs)
			if err != nil {
				return err
			}
			if _, err := rawProduce(ctx, cl, l, p, b); err != nil {
				return fmt.Errorf("produce data set: %w", err)
			}
			records.Add(int64(perBatch))
			bytes.Add(raw)
			if written.Add(int64(len(b))) >= size {
				return nil
			}
		}
	})
	if err != nil {
		return dataset{}, err
	}
	d := dataset{layout: l, partitions: partitions, records: records.Load(), recordBytes: bytes.Load(), produceTime: time.Since(start)}
	if d.ends, err = endOffsets(ctx, cl, topic, partitions); err != nil {
		return dataset{}, err
	}
	var total int64
	for _, e := range d.ends {
		total += e
	}
	if total != d.records {
		return dataset{}, fmt.Errorf("data set %s holds %d records, produced %d", topic, total, d.records)
	}
	return d, nil
}

// readAll reads every batch of the data set with raw fetches, many
// partitions per request, and calls fn (if not nil) for each complete
// batch. It returns the bytes and batches read. It is both phase (a), the
// reading ceiling, and the scan that measures the data set's wire size.
func readAll(ctx context.Context, cl *kgo.Client, d dataset, fn func(p int32, h batch.Header, b []byte)) (bytes, batches int64, err error) {
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for broker, parts := range d.byLeader() {
		wg.Go(func() {
			n, nb, err := readBroker(ctx, cl, d, broker, parts, fn)
			mu.Lock()
			defer mu.Unlock()
			bytes += n
			batches += nb
			if err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
		})
	}
	wg.Wait()
	return bytes, batches, firstErr
}

// readAnswer counts the batches of one fetch answer for a partition read
// from offset off (calling fn, when not nil, with each), and returns the
// offset after the last of them: off when it held none.
func readAnswer(d dataset, a fetchAnswer, off int64, fn func(int32, batch.Header, []byte)) (next, bytes, batches int64, err error) {
	next = off
	_, err = batch.Split(a.records, func(h batch.Header, b []byte) error {
		bytes += int64(len(b))
		batches++
		next = h.NextOffset()
		if fn != nil {
			fn(a.partition, h, b)
		}
		return nil
	})
	if err != nil {
		return next, bytes, batches, fmt.Errorf("read %s/%d: %w", d.topic, a.partition, err)
	}
	return next, bytes, batches, nil
}

// readBroker reads the partitions led by one broker to their ends.
func readBroker(ctx context.Context, cl *kgo.Client, d dataset, broker int32, parts []int32, fn func(int32, batch.Header, []byte)) (bytes, batches int64, err error) {
	next := make(map[int32]int64, len(parts))
	size := make(map[int32]int32, len(parts)) // grows when one batch exceeds it
	for _, p := range parts {
		if d.ends[p] > 0 {
			next[p], size[p] = 0, 1<<20
		}
	}
	req := make([]fetchPart, 0, len(parts))
	for len(next) > 0 {
		req = req[:0]
		for _, p := range parts {
			if off, ok := next[p]; ok {
				req = append(req, fetchPart{partition: p, offset: off, maxBytes: size[p]})
			}
		}
		answers, err := rawFetch(ctx, cl, broker, d.layout, req, 250*time.Millisecond)
		if err != nil {
			return bytes, batches, err
		}
		for _, a := range answers {
			off, n, nb, err := readAnswer(d, a, next[a.partition], fn)
			bytes, batches = bytes+n, batches+nb
			if err != nil {
				return bytes, batches, err
			}
			switch {
			case off >= d.ends[a.partition]:
				delete(next, a.partition)
			case off == next[a.partition] && len(a.records) > 0:
				size[a.partition] = min(size[a.partition]*2, 64<<20)
			default:
				next[a.partition] = off
			}
		}
	}
	return bytes, batches, nil
}
