package main

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/kmirror/kmirror/metrics"
)

// version is kmirror's release, set at build time with
// -ldflags "-X main.version=v1.2.3"; "dev" otherwise.
var version = "dev"

// versionString is the release and, when the binary was built from a git
// checkout, the commit: instances report it in their heartbeats, so an
// operator can see which build runs where during a rolling upgrade.
func versionString() string {
	if rev := buildCommit(); rev != "" {
		return version + " (" + rev + ")"
	}
	return version
}

// buildCommit is the commit Go recorded (12 digits, "+dirty" for a
// modified work tree), "" when the build had no VCS information.
func buildCommit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

// versionReport is kmirror --version: the release, the commit, the module
// version Go recorded (a "go install ...@v1.2.3" build has one) and the Go
// toolchain, which is what a bug report needs.
func versionReport() string {
	commit, module, goVersion := buildCommit(), "unknown (not built as a module)", runtime.Version()
	if commit == "" {
		commit = "unknown (built without VCS information)"
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path != "" {
			module = bi.Main.Path + " " + bi.Main.Version
		}
		goVersion = bi.GoVersion
	}
	return fmt.Sprintf("kmirror %s\ncommit: %s\nmodule: %s\ngo: %s %s/%s\n", version, commit, module, goVersion, runtime.GOOS, runtime.GOARCH)
}

// metricsBuild is the build as kmirror_build_info names it.
func metricsBuild() metrics.Build {
	return metrics.Build{Version: version, Revision: cmp.Or(buildCommit(), "unknown")}
}
