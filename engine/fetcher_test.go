package engine_test

import (
	"context"
	"encoding/binary"
	"net"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/engine/enginetest"
)

// headerSniffer records the request key and client id of every request the
// brokers of a kfake cluster read, by parsing the request headers of the
// plaintext byte stream each accepted connection delivers.
type headerSniffer struct {
	mu   sync.Mutex
	seen map[int16]map[string]int // request key -> client id -> requests
}

func newHeaderSniffer() *headerSniffer {
	return &headerSniffer{seen: make(map[int16]map[string]int)}
}

func (s *headerSniffer) listen(network, address string) (net.Listener, error) {
	l, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return &sniffListener{Listener: l, s: s}, nil
}

// clientIDs returns the client ids seen on requests with key.
func (s *headerSniffer) clientIDs(key kmsg.Key) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int)
	for id, n := range s.seen[int16(key)] {
		out[id] = n
	}
	return out
}

type sniffListener struct {
	net.Listener
	s *headerSniffer
}

func (l *sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, s: l.s}, nil
}

// sniffConn parses the request frames read from the connection: a 4-byte
// size, then key, version, correlation id and the nullable client id.
type sniffConn struct {
	net.Conn
	s   *headerSniffer
	buf []byte
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.buf = append(c.buf, p[:n]...)
	for len(c.buf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.buf))
		if len(c.buf) < 4+size {
			break
		}
		frame := c.buf[4 : 4+size]
		if len(frame) >= 10 {
			key := int16(binary.BigEndian.Uint16(frame))
			idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
			id := ""
			if idLen > 0 && 10+idLen <= len(frame) {
				id = string(frame[10 : 10+idLen])
			}
			c.s.mu.Lock()
			if c.s.seen[key] == nil {
				c.s.seen[key] = make(map[string]int)
			}
			c.s.seen[key][id]++
			c.s.mu.Unlock()
		}
		c.buf = c.buf[4+size:]
	}
	return n, err
}

// TestFetchClientID: every Fetch the mirror sends to the source carries its
// fetcher's client id kmirror-<instance>-<fetcher index>-<mirror>, so a
// source quota can target one fetcher of one mirror; nothing else fetches.
func TestFetchClientID(t *testing.T) {
	sniff := newHeaderSniffer()
	src := enginetest.NewCluster(t, "kmirror-test-source", kfake.ListenFn(sniff.listen))
	dst := enginetest.NewCluster(t, "kmirror-test-destination")
	src.CreateTopic(t, "quota", 4, nil)
	srcCl := src.Client(t, enginetest.ProducerOpts("zstd", true)...)
	enginetest.Produce(t, srcCl, "quota", 4, 200, "zstd")

	eng, err := engine.New(context.Background(), engine.Config{Destination: dst.Addrs(), Instance: "inst1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	cfg := engine.MirrorConfig{Name: "a-to-b", SourceBootstrap: src.Addrs(), Topics: []string{"quota"}, NumFetchers: 2}
	if err := eng.StartMirror(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	dstCl := dst.Client(t)
	ctx := context.Background()
	enginetest.Wait(t, 60*time.Second, func() (bool, string) {
		se, err1 := enginetest.Ends(ctx, srcCl, "quota")
		de, err2 := enginetest.Ends(ctx, dstCl, "quota")
		return err1 == nil && err2 == nil && len(se) == 4 && slices.Equal(se, de), "destination still behind"
	})

	want := map[string]bool{"kmirror-inst1-0-a-to-b": true, "kmirror-inst1-1-a-to-b": true}
	ids := sniff.clientIDs(kmsg.Fetch)
	var names []string
	for id := range ids {
		names = append(names, id)
		if !want[id] {
			t.Errorf("a Fetch to the source carried client id %q, want one of kmirror-inst1-{0,1}-a-to-b", id)
		}
	}
	sort.Strings(names)
	if len(ids) == 0 {
		t.Fatal("no Fetch request reached the source")
	}
	t.Logf("fetch client ids: %v", names)
}
