// Package sandbox runs the self-contained setting of kmirror demo: two
// in-process Kafka clusters, "A" and "B", on loopback ports, producers of
// every kind of data the mirror copies, and a consumer group. It can take A
// down and bring it back with its data, and move the clients between the
// clusters, which is what a disaster-recovery drill needs.
package sandbox

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/engine/logging/kfakelog"
	"github.com/kmirror/kmirror/internal/linkproxy"
)

// Cluster ids of the demo clusters. They say which side is which.
const (
	ClusterA = "kmirror-demo-A"
	ClusterB = "kmirror-demo-B"
)

// Options configure a sandbox.
type Options struct {
	// Dir holds the clusters' data; a temporary directory (removed by
	// Close) when empty. Cluster A restarts from it after an outage.
	Dir string
	// NoClients starts the clusters and topics without producers or the
	// consumer group.
	NoClients bool
	// Link, when set, puts A in another region: the mirror reaches A
	// through a model of the WAN link between the regions (an added round
	// trip and a bandwidth cap, see SourceBootstrap), while A's own
	// producers and consumer group, in A's region, reach it directly.
	Link *linkproxy.Options
	// Logger hears the clusters' brokers (cluster=A or B); nil: nothing
	// is logged.
	Logger *slog.Logger
}

// Sandbox is the two clusters with the demo's clients.
type Sandbox struct {
	mu     sync.Mutex
	A, B   *kfake.Cluster
	aUp    bool
	dir    string
	tmpDir bool
	portsA []int
	link   *linkproxy.Link // in front of A, nil without Options.Link
	log    *slog.Logger

	ledger   *Ledger
	consumer *Consumer
	traffic  *Traffic
	seq      map[string]*atomic.Int64
}

// Start starts both clusters, creates the topics on A, and starts the
// producers and the consumer group on A.
func Start(ctx context.Context, opts Options) (*Sandbox, error) {
	s := &Sandbox{dir: opts.Dir, ledger: newLedger(), consumer: newConsumer(), seq: map[string]*atomic.Int64{}, log: opts.Logger}
	if s.log == nil {
		s.log = logging.Discard()
	}
	for _, t := range Topics {
		s.seq[t.Name] = new(atomic.Int64)
	}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "kmirror-demo-")
		if err != nil {
			return nil, fmt.Errorf("sandbox data directory: %w", err)
		}
		s.dir, s.tmpDir = d, true
	}
	a, err := kfake.NewCluster(s.clusterOpts(SideA)...)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("start cluster A: %w", err)
	}
	s.A, s.aUp = a, true
	// A restarts on the same ports after an outage, so clients and the
	// mirror's source bootstrap keep working unchanged.
	for _, addr := range a.ListenAddrs() {
		_, port, _ := net.SplitHostPort(addr)
		p, err := strconv.Atoi(port)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("cluster A address %s: %w", addr, err)
		}
		s.portsA = append(s.portsA, p)
	}
	if s.B, err = kfake.NewCluster(s.clusterOpts(SideB)...); err != nil {
		s.Close()
		return nil, fmt.Errorf("start cluster B: %w", err)
	}
	if err := createTopics(ctx, a.ListenAddrs()); err != nil {
		s.Close()
		return nil, err
	}
	if opts.Link != nil {
		// The proxies stay up through A's outage: A restarts on the same
		// ports behind them.
		if s.link, err = linkproxy.Start(a.ListenAddrs(), *opts.Link); err != nil {
			s.Close()
			return nil, fmt.Errorf("link in front of cluster A: %w", err)
		}
	}
	if opts.NoClients {
		return s, nil
	}
	if err := s.MoveClients(SideA); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func createTopics(ctx context.Context, bootstrap []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, t := range Topics {
		var cfg map[string]*string
		if t.Compacted {
			compact := "compact"
			cfg = map[string]*string{"cleanup.policy": &compact}
		}
		resp, err := adm.CreateTopic(ctx, t.Partitions, -1, cfg, t.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("create topic %s on A: %w", t.Name, err)
		}
	}
	return nil
}

// Bootstrap returns a side's addresses.
func (s *Sandbox) Bootstrap(side Side) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if side == SideA {
		return addrs("127.0.0.1", s.portsA)
	}
	return s.B.ListenAddrs()
}

// SourceBootstrap is how the mirror reaches A: through the link when A is
// in another region, else A's own addresses.
func (s *Sandbox) SourceBootstrap() []string {
	if s.link != nil {
		return s.link.Addrs()
	}
	return s.Bootstrap(SideA)
}

// Link returns what the link in front of A adds, and false when there is
// none.
func (s *Sandbox) Link() (linkproxy.Options, bool) {
	if s.link == nil {
		return linkproxy.Options{}, false
	}
	return s.link.Options(), true
}

func addrs(host string, ports []int) []string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = net.JoinHostPort(host, strconv.Itoa(p))
	}
	return out
}

// Ledger returns every write the clusters acknowledged to the producers.
func (s *Sandbox) Ledger() *Ledger { return s.ledger }

// Consumer returns the demo consumer group member.
func (s *Sandbox) Consumer() *Consumer { return s.consumer }

// MoveClients starts the producers and the consumer on side, then stops
// them wherever they ran before: the "switch clients" of a failover.
// Starting first keeps the time it takes to close clients of a dead
// cluster out of the measured recovery time.
func (s *Sandbox) MoveClients(side Side) error {
	s.mu.Lock()
	old := s.traffic
	s.traffic = nil
	s.mu.Unlock()
	oldRun := s.consumer.detach()
	defer func() {
		if old != nil {
			old.Stop()
		}
		oldRun.stop()
	}()
	tr, err := startTraffic(s.Bootstrap(side), side, s.ledger, s.seq)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.traffic = tr
	s.mu.Unlock()
	return s.consumer.start(s.Bootstrap(side), side)
}

// StopClients stops the producers and the consumer.
func (s *Sandbox) StopClients() {
	s.StopProducers()
	s.consumer.stop()
}

// StopProducers stops the producers only; writes still in flight are
// abandoned and counted as failed.
func (s *Sandbox) StopProducers() {
	s.mu.Lock()
	tr := s.traffic
	s.traffic = nil
	s.mu.Unlock()
	if tr != nil {
		tr.Stop()
	}
}

// TakeDownA closes every listener of cluster A: the outage. Its data stays
// in the data directory.
func (s *Sandbox) TakeDownA() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aUp {
		s.A.Close()
		s.aUp = false
	}
}

// clusterOpts are the options of a side's cluster: three brokers, its id,
// its data directory and its log.
func (s *Sandbox) clusterOpts(side Side) []kfake.Opt {
	id, dir := ClusterA, "A"
	if side == SideB {
		id, dir = ClusterB, "B"
	}
	return []kfake.Opt{kfake.NumBrokers(3), kfake.ClusterID(id), kfake.DataDir(filepath.Join(s.dir, dir)),
		kfake.WithLogger(kfakelog.New(s.log.With(logging.Cluster, dir)))}
}

// RestartA brings cluster A back on the same ports with the data it had.
func (s *Sandbox) RestartA() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aUp {
		return nil
	}
	a, err := kfake.NewCluster(append(s.clusterOpts(SideA), kfake.Ports(s.portsA...))...)
	if err != nil {
		return fmt.Errorf("restart cluster A on ports %v: %w", s.portsA, err)
	}
	s.A, s.aUp = a, true
	return nil
}

// Describe writes the clusters' addresses so a second terminal can reach them.
func (s *Sandbox) Describe(w io.Writer) {
	fmt.Fprintf(w, "cluster A (%s, source):      %s\n", ClusterA, strings.Join(s.Bootstrap(SideA), ","))
	fmt.Fprintf(w, "cluster B (%s, destination): %s\n", ClusterB, strings.Join(s.Bootstrap(SideB), ","))
	if o, ok := s.Link(); ok {
		fmt.Fprintf(w, "A is in another region: the mirror reaches it through a link adding %s round trip, %s (%s)\n",
			o.RTT, BandwidthText(o.Bandwidth), strings.Join(s.SourceBootstrap(), ","))
	}
	var ts []string
	for _, t := range Topics {
		c := ""
		if t.Compacted {
			c = ", compacted"
		}
		ts = append(ts, fmt.Sprintf("%s (%s, %s%s, %d/s)", t.Name, t.CodecName, t.Kind, c, t.Rate))
	}
	fmt.Fprintf(w, "topics on A: %s\n", strings.Join(ts, "; "))
	fmt.Fprintf(w, "consumer group %s processes %s\n", GroupID, ProcessedTopic)
}

// Close stops the clients and both clusters and removes a temporary data
// directory.
func (s *Sandbox) Close() {
	s.StopClients()
	s.mu.Lock()
	if s.aUp && s.A != nil {
		s.A.Close()
		s.aUp = false
	}
	if s.B != nil {
		s.B.Close()
	}
	s.mu.Unlock()
	if s.link != nil {
		s.link.Close()
	}
	if s.tmpDir {
		_ = os.RemoveAll(s.dir)
	}
}

// BandwidthText says a link's bandwidth cap for people.
func BandwidthText(bytesPerSecond int64) string {
	switch {
	case bytesPerSecond <= 0:
		return "no bandwidth cap"
	case bytesPerSecond >= 1<<20 && bytesPerSecond%(1<<20) == 0:
		return fmt.Sprintf("%d MiB/s", bytesPerSecond>>20)
	case bytesPerSecond >= 1<<10 && bytesPerSecond%(1<<10) == 0:
		return fmt.Sprintf("%d KiB/s", bytesPerSecond>>10)
	}
	return fmt.Sprintf("%d B/s", bytesPerSecond)
}
