package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/internal/linkproxy"
)

// ClusterEnv, when set in the environment, makes the kmirror binary run as
// one bench cluster (ClusterMain) instead of its normal modes. The bench sets
// it when it re-executes itself, so the brokers' CPU time is spent in a
// child process and never counted as the engine's.
const ClusterEnv = "KMIRROR_BENCH_CLUSTER"

// The child's line protocol. The first line on stdout announces the
// listeners; afterwards each "cpu" line on stdin is answered by one
// "cpu <seconds>" line, and each "link <rtt> <bandwidth> <produce latency>"
// line (durations and bytes per second) starts link proxies in front of the
// brokers and is answered by "link <addresses>". The proxies run in the
// child, so their CPU time is the cluster's, not the engine's. EOF on stdin
// (the parent closed it or died) or a signal ends the child.
const (
	lineAddrs = "addrs"
	lineCPU   = "cpu"
	lineLink  = "link"
	lineErr   = "error"
)

// ClusterMain runs one in-memory Kafka cluster for the bench until its stdin
// closes or it is signalled. It returns the process exit code.
func ClusterMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return clusterMain(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

func clusterMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kmirror bench cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.Int("brokers", 3, "number of brokers")
	id := fs.String("cluster-id", "kmirror-bench", "cluster id")
	cpuProfile := fs.String("cpu-profile", "", "write the cluster's CPU profile, from start to exit, into this file")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *brokers < 1 {
		fmt.Fprintf(stderr, "kmirror bench cluster: --brokers must be at least 1, got %d\n", *brokers)
		return exitUsage
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(*brokers), kfake.ClusterID(*id))
	if err != nil {
		fmt.Fprintf(stderr, "kmirror bench cluster %s: %v\n", *id, err)
		return exitFail
	}
	defer c.Close()
	if *cpuProfile != "" {
		stopProfile, err := startProcessProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "kmirror bench cluster %s: %v\n", *id, err)
			return exitFail
		}
		defer stopProfile()
	}
	var links []*linkproxy.Link
	defer func() {
		for _, l := range links {
			l.Close()
		}
	}()
	out := bufio.NewWriter(stdout)
	fmt.Fprintf(out, "%s %s\n", lineAddrs, strings.Join(c.ListenAddrs(), ","))
	if err := out.Flush(); err != nil {
		return exitFail
	}

	// The reader goroutine blocks in Read and cannot be interrupted; it is
	// not joined because returning from here ends the process.
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			select {
			case lines <- strings.TrimSpace(sc.Text()):
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case l, ok := <-lines:
			if !ok {
				return exitOK
			}
			cmd, args, _ := strings.Cut(l, " ")
			switch cmd {
			case lineCPU:
				d, err := processCPU()
				if err != nil {
					fmt.Fprintf(out, "%s %v\n", lineErr, err)
				} else {
					fmt.Fprintf(out, "%s %.6f\n", lineCPU, d.Seconds())
				}
			case lineLink:
				lk, err := startLink(c.ListenAddrs(), args)
				if err != nil {
					fmt.Fprintf(out, "%s %v\n", lineErr, err)
				} else {
					links = append(links, lk)
					fmt.Fprintf(out, "%s %s\n", lineLink, strings.Join(lk.Addrs(), ","))
				}
			case "":
				continue
			default:
				fmt.Fprintf(out, "%s unknown command %q\n", lineErr, l)
			}
			if err := out.Flush(); err != nil {
				return exitFail
			}
		}
	}
}

// startProcessProfile starts a CPU profile of the whole process into file;
// the returned function ends it.
func startProcessProfile(file string) (func(), error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// startLink starts the link proxies a "link" line asks for.
func startLink(brokers []string, args string) (*linkproxy.Link, error) {
	f := strings.Fields(args)
	if len(f) != 3 {
		return nil, fmt.Errorf("link wants <rtt> <bandwidth> <produce latency>, got %q", args)
	}
	rtt, err1 := time.ParseDuration(f[0])
	bw, err2 := strconv.ParseInt(f[1], 10, 64)
	pl, err3 := time.ParseDuration(f[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("link %q: %w", args, err)
	}
	return linkproxy.Start(brokers, linkproxy.Options{RTT: rtt, Bandwidth: bw, ProduceLatency: pl})
}

// clusterProc is a running cluster child as the bench sees it.
type clusterProc struct {
	id    string
	addrs []string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string   // stdout lines, closed when the child's stdout ends
	quit  chan struct{} // closed by close: the reader stops delivering lines
	wg    sync.WaitGroup

	mu sync.Mutex // one request/answer exchange at a time
}

// childStartTimeout bounds how long a child may take to announce itself.
const childStartTimeout = 30 * time.Second

// startCluster re-executes the running binary as a cluster child; with a
// profile file it writes its CPU profile there when it exits.
func startCluster(ctx context.Context, id string, brokers int, profile string, stderr io.Writer) (*clusterProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start cluster %s: find own executable: %w", id, err)
	}
	args := []string{"--brokers", strconv.Itoa(brokers), "--cluster-id", id}
	if profile != "" {
		args = append(args, "--cpu-profile", profile)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), ClusterEnv+"=1")
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start cluster %s: %w", id, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start cluster %s: %w", id, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start cluster %s: %w", id, err)
	}
	p := &clusterProc{id: id, cmd: cmd, stdin: stdin, lines: make(chan string, 4), quit: make(chan struct{})}
	p.wg.Go(func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			case <-p.quit: // keep reading to EOF so the child never blocks writing
			}
		}
	})
	first, err := p.readLine(ctx, childStartTimeout)
	if err != nil {
		p.close()
		return nil, fmt.Errorf("start cluster %s: %w", id, err)
	}
	rest, ok := strings.CutPrefix(first, lineAddrs+" ")
	if !ok || rest == "" {
		p.close()
		return nil, fmt.Errorf("start cluster %s: unexpected first line %q", id, first)
	}
	p.addrs = strings.Split(rest, ",")
	return p, nil
}

// readLine waits for the child's next stdout line.
func (p *clusterProc) readLine(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
		return "", fmt.Errorf("cluster %s did not answer within %s", p.id, timeout)
	case l, ok := <-p.lines:
		if !ok {
			return "", fmt.Errorf("cluster %s exited", p.id)
		}
		return l, nil
	}
}

// link asks the child for link proxies in front of its brokers and returns
// their addresses, what clients of the linked cluster bootstrap from.
func (p *clusterProc) link(ctx context.Context, o linkproxy.Options) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintf(p.stdin, "%s %s %d %s\n", lineLink, o.RTT, o.Bandwidth, o.ProduceLatency); err != nil {
		return nil, fmt.Errorf("ask cluster %s for a link: %w", p.id, err)
	}
	l, err := p.readLine(ctx, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("ask cluster %s for a link: %w", p.id, err)
	}
	v, ok := strings.CutPrefix(l, lineLink+" ")
	if !ok || v == "" {
		return nil, fmt.Errorf("cluster %s link: unexpected answer %q", p.id, l)
	}
	return strings.Split(v, ","), nil
}

// cpu asks the child for the CPU time it has used so far.
func (p *clusterProc) cpu(ctx context.Context) (time.Duration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.stdin, lineCPU+"\n"); err != nil {
		return 0, fmt.Errorf("ask cluster %s for its CPU time: %w", p.id, err)
	}
	l, err := p.readLine(ctx, 10*time.Second)
	if err != nil {
		return 0, fmt.Errorf("ask cluster %s for its CPU time: %w", p.id, err)
	}
	v, ok := strings.CutPrefix(l, lineCPU+" ")
	if !ok {
		return 0, fmt.Errorf("cluster %s CPU time: unexpected answer %q", p.id, l)
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster %s CPU time %q: %w", p.id, v, err)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// close ends the child: closing stdin asks it to exit; a child that does not
// within a few seconds is killed. Its stdout is read to the end before Wait,
// which closes the pipe.
func (p *clusterProc) close() error {
	_ = p.stdin.Close()
	close(p.quit)
	eof := make(chan struct{})
	go func() { // joined below: it ends once the reader has seen EOF
		p.wg.Wait()
		close(eof)
	}()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-eof:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-eof
	}
	err := p.cmd.Wait()
	if err != nil {
		return fmt.Errorf("cluster %s: %w", p.id, err)
	}
	return nil
}
