package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/metrics"
)

// modeFlags are the flags each mode takes, for completion; a test checks
// them against the modes' --help.
var modeFlags = map[string][]string{
	"run": {"--bootstrap-server", "--command-config", "--instance", "--heartbeat-interval", "--metrics-addr", "--metrics-granularity",
		"--log-level", "--log-format"},
	"console": {"--bootstrap-server", "--command-config", "--instance", "--heartbeat-interval", "--metrics-addr", "--metrics-granularity",
		"--read-only", "--run-instance", "--theme", "--ascii", "--log-file", "--log-level", "--log-format", "--drill", "--mirror", "--report", "--step-timeout"},
	"demo":    {"--headless", "--no-drill", "--drill-script", "--scenario", "--link-rtt", "--link-bandwidth", "--report", "--step-timeout", "--theme", "--ascii", "--log-file", "--log-level", "--log-format"},
	"sandbox": {"--log-level", "--log-format"},
	"bench": {"--size", "--partitions", "--codec", "--repeats", "--quick", "--json", "--brokers", "--profile", "--profile-copy", "--max-inflight",
		"--num-fetchers", "--fetch-max-wait", "--partition-fetch-bytes", "--scale-topic-partitions", "--scale", "--scale-across-link", "--scale-timeout",
		"--rtt", "--bandwidth", "--produce-latency", "--measure", "--phases",
		"--log-level", "--log-format"},
}

var modes = []string{"run", "console", "demo", "sandbox", "bench", "version", "help", "completion"}

// completion prints a shell completion script: kmirror completion bash|zsh.
func completion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, "Usage: kmirror completion bash|zsh\n\nPrints a completion script for the shell. Load it with\n  source <(kmirror completion bash)      # in ~/.bashrc\n  source <(kmirror completion zsh)       # in ~/.zshrc\n")
		return exitOK
	}
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		fmt.Fprintf(stderr, "kmirror completion: want bash or zsh\nRun \"kmirror completion --help\" for its usage.\n")
		return exitUsage
	}
	if args[0] == "zsh" {
		// zsh runs the bash function through bashcompinit: one script
		// to keep in step with the flags, not two.
		fmt.Fprint(stdout, "#compdef kmirror\nautoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n")
	}
	fmt.Fprint(stdout, bashCompletion())
	return exitOK
}

func bashCompletion() string {
	var b strings.Builder
	b.WriteString(`# kmirror bash completion
_kmirror() {
    local cur prev w action opts
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    case "$prev" in
        --mirror-config|--command-config|--log-file|--report) COMPREPLY=($(compgen -f -- "$cur")); return;;
        --theme) COMPREPLY=($(compgen -W "dark light high-contrast" -- "$cur")); return;;
`)
	for _, fv := range []struct {
		flag   string
		values []string
	}{
		{"--log-level", logging.Levels}, {"--log-format", logging.Formats},
		{"--metrics-granularity", []string{string(metrics.PerPartition), string(metrics.PerTopic)}},
	} {
		fmt.Fprintf(&b, "        %s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return;;\n", fv.flag, strings.Join(fv.values, " "))
	}
	b.WriteString(`    esac
    if [[ $COMP_CWORD -eq 1 ]]; then
`)
	fmt.Fprintf(&b, "        COMPREPLY=($(compgen -W %q -- \"$cur\")); return\n    fi\n", strings.Join(append(slices.Clone(modes), "--bootstrap-server", "--version", "--help"), " "))
	b.WriteString("    case \"${COMP_WORDS[1]}\" in\n")
	for _, m := range modes {
		if fl, ok := modeFlags[m]; ok {
			fmt.Fprintf(&b, "        %s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return;;\n", m, strings.Join(append(slices.Clone(fl), "--help"), " "))
		}
	}
	b.WriteString("        completion) COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\")); return;;\n    esac\n")
	// An action: once one is on the line, only its options.
	b.WriteString("    action=\"\"\n    for w in \"${COMP_WORDS[@]}\"; do\n        case \"$w\" in\n")
	var all []string
	for _, a := range actionSpecs {
		all = append(all, "--"+a.name)
		opts := append([]string{}, prefixed(commonFlags)...)
		opts = append(opts, prefixed(a.options)...)
		fmt.Fprintf(&b, "            --%s) action=%q;;\n", a.name, strings.Join(opts, " "))
	}
	b.WriteString("        esac\n    done\n")
	fmt.Fprintf(&b, "    opts=\"${action:-%s}\"\n", strings.Join(append(prefixed(commonFlags), all...), " "))
	b.WriteString("    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n}\ncomplete -F _kmirror kmirror\n")
	return b.String()
}

func prefixed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "--" + n
	}
	return out
}
