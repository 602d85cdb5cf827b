package linkproxy

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// On Linux a delayed line holds the bytes of a large answer in pipes, not
// in the proxy's memory: they go from socket to pipe and, at their due
// time, from pipe to socket inside the kernel (splice). The bench runs
// the link model on the cores the mirror runs on, and copying every
// fetched byte in and out of the proxy was a third of its source
// process's CPU: a cost a real WAN does not add to the mirror's host.

const (
	// pipeSize is the capacity asked of each pipe (Linux's default
	// ceiling for an unprivileged process, /proc/sys/fs/pipe-max-size).
	pipeSize = 1 << 20
	// spliceFlags: move pages rather than copy them where the kernel
	// can, and never block (the sockets are non-blocking; Go's poller
	// waits for them).
	spliceFlags = 0x1 | 0x2 // SPLICE_F_MOVE | SPLICE_F_NONBLOCK
	// fSetPipeSz is F_SETPIPE_SZ.
	fSetPipeSz = 1031
)

// pipe is one kernel pipe holding a chunk of a line.
type pipe struct {
	r, w int
	size int // its capacity
}

// pipes are a link's idle pipes, reused across its connections.
type pipes struct {
	mu     sync.Mutex
	free   []*pipe
	closed bool
}

// get returns an empty pipe.
func (ps *pipes) get() (*pipe, error) {
	ps.mu.Lock()
	if n := len(ps.free); n > 0 && !ps.closed {
		p := ps.free[n-1]
		ps.free = ps.free[:n-1]
		ps.mu.Unlock()
		return p, nil
	}
	closed := ps.closed
	ps.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		return nil, err
	}
	p := &pipe{r: fds[0], w: fds[1], size: 64 << 10}
	if n, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(p.w), fSetPipeSz, pipeSize); errno == 0 {
		p.size = int(n)
	}
	return p, nil
}

// put takes back a pipe that is empty again.
func (ps *pipes) put(p *pipe) {
	ps.mu.Lock()
	if !ps.closed {
		ps.free = append(ps.free, p)
		ps.mu.Unlock()
		return
	}
	ps.mu.Unlock()
	p.close()
}

// drop closes a pipe that may still hold bytes.
func (ps *pipes) drop(p *pipe) { p.close() }

func (p *pipe) close() {
	_ = syscall.Close(p.r)
	_ = syscall.Close(p.w)
}

// close closes the idle pipes; pipes in use are closed when they are put
// back.
func (ps *pipes) close() {
	ps.mu.Lock()
	free := ps.free
	ps.free, ps.closed = nil, true
	ps.mu.Unlock()
	for _, p := range free {
		p.close()
	}
}

// rawConn is the raw descriptor of a TCP connection, or nil.
func rawConn(c net.Conn) syscall.RawConn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// fill moves up to max bytes that src has now (waiting for some if it has
// none) into the empty pipe p, and returns how many; 0 with a nil error is
// the end of src's stream.
func (p *pipe) fill(src syscall.RawConn, max int) (int, error) {
	var (
		n    int64
		serr error
	)
	err := src.Read(func(fd uintptr) bool {
		for {
			n, serr = syscall.Splice(int(fd), nil, p.w, nil, min(max, p.size), spliceFlags)
			switch {
			case errors.Is(serr, syscall.EINTR):
				continue
			case errors.Is(serr, syscall.EAGAIN):
				return false // wait until src is readable
			}
			return true
		}
	})
	if err == nil {
		err = serr
	}
	return int(n), err
}

// drain moves all n bytes in p to dst.
func (p *pipe) drain(dst syscall.RawConn, n int) error {
	var serr error
	err := dst.Write(func(fd uintptr) bool {
		for n > 0 {
			m, e := syscall.Splice(p.r, nil, int(fd), nil, n, spliceFlags)
			switch {
			case errors.Is(e, syscall.EINTR):
				continue
			case errors.Is(e, syscall.EAGAIN):
				return false // wait until dst is writable
			case e != nil:
				serr = e
				return true
			case m == 0:
				serr = syscall.EPIPE
				return true
			}
			n -= int(m)
		}
		return true
	})
	if err == nil {
		err = serr
	}
	return err
}
