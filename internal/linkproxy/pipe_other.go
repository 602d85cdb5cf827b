//go:build !linux

package linkproxy

import (
	"errors"
	"net"
	"syscall"
)

// Elsewhere than on Linux a delayed line keeps its bytes in memory.

var errNoSplice = errors.New("linkproxy: no splice on this system")

type pipe struct{}

type pipes struct{}

func (ps *pipes) get() (*pipe, error) { return nil, errNoSplice }
func (ps *pipes) put(*pipe)           {}
func (ps *pipes) drop(*pipe)          {}
func (ps *pipes) close()              {}

func rawConn(net.Conn) syscall.RawConn { return nil }

func (p *pipe) fill(syscall.RawConn, int) (int, error) { return 0, errNoSplice }
func (p *pipe) drain(syscall.RawConn, int) error       { return errNoSplice }
