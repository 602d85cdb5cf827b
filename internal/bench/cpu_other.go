//go:build !unix

package bench

import (
	"errors"
	"time"
)

// processCPU is not available without getrusage; the bench reports the
// CPU figures as unmeasured rather than guessing.
func processCPU() (time.Duration, error) {
	return 0, errors.New("process CPU time is not available on this platform")
}
