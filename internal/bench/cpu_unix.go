//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU is the user plus system CPU time this process has used. The
// bench compares it across phases, so the broker processes (children) must
// not be part of it: RUSAGE_SELF counts only this process.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
