package systemd

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
	"github.com/oikos-hq/oikos/testkit/labsim/system/state"
)

// entry is one journal record.
type entry struct {
	at    time.Time
	ident string
	pid   int
	prio  int
	unit  string // _SYSTEMD_UNIT, or UNIT= for systemd's own lines about a unit
	msg   string
}

func (e entry) short(host string, iso bool) string {
	stamp := e.at.Format("Jan 02 15:04:05")
	if iso {
		stamp = e.at.Format("2006-01-02T15:04:05-07:00")
	}
	return fmt.Sprintf("%s %s %s: %s", stamp, host, e.tag(), e.msg)
}

// tag is "ident[pid]", or just "kernel" for the kernel's lines.
func (e entry) tag() string {
	if e.pid == 0 {
		return e.ident
	}
	return fmt.Sprintf("%s[%d]", e.ident, e.pid)
}

func lastN(es []entry, n int) []entry {
	if n >= 0 && len(es) > n {
		return es[len(es)-n:]
	}
	return es
}

// unitEntries fabricates a unit's journal from its state: its start (or stop) by systemd,
// then for a running service an hourly line from the service itself.
func (t Tools) unitEntries(u state.Unit) []entry {
	desc := state.Describe(u.Name)
	at := u.Since
	var es []entry
	sys := func(at time.Time, msg string) entry { return entry{at, "systemd", 1, 6, u.Name, msg} }
	if !u.Active {
		return []entry{
			sys(at.Add(-time.Second), fmt.Sprintf("Stopping %s - %s...", u.Name, desc)),
			sys(at, fmt.Sprintf("%s: Deactivated successfully.", u.Name)),
			sys(at, fmt.Sprintf("Stopped %s - %s.", u.Name, desc)),
		}
	}
	if kind(u.Name) == "timer" {
		return []entry{sys(at, fmt.Sprintf("Started %s - %s.", u.Name, desc))}
	}
	proc := state.ProcessName(u.Name)
	es = append(es,
		sys(at.Add(-time.Second), fmt.Sprintf("Starting %s - %s...", u.Name, desc)),
		sys(at, fmt.Sprintf("Started %s - %s.", u.Name, desc)),
		entry{at.Add(2 * time.Second), proc, u.PID, 6, u.Name, "listening, ready"},
	)
	now := t.M.Now()
	first := now.Truncate(time.Hour).Add(-23 * time.Hour)
	for h := first; !h.After(now); h = h.Add(time.Hour) {
		if h.After(at.Add(2 * time.Second)) {
			es = append(es, entry{h, proc, u.PID, 6, u.Name, "health check ok"})
		}
	}
	return es
}

// kernelEntries are the boot's kernel lines (journalctl -k).
func (t Tools) kernelEntries() []entry {
	b := t.M.Boot()
	k := func(d time.Duration, msg string) entry { return entry{b.Add(d), "kernel", 0, 6, "", msg} }
	return []entry{
		k(0, "Linux version "+t.kernel()+" (Debian) #1 SMP PREEMPT_DYNAMIC"),
		k(0, "Command line: BOOT_IMAGE=/boot/vmlinuz-"+t.kernel()+" root=/dev/mapper/pve-root ro quiet"),
		k(time.Second, fmt.Sprintf("Memory: %dK/%dK available", t.M.MemoryMB()*1024*97/100, t.M.MemoryMB()*1024)),
		k(3*time.Second, "EXT4-fs (dm-1): mounted filesystem with ordered data mode. Quota mode: none."),
	}
}

func (t Tools) kernel() string { return t.M.Kernel() }

func (t Tools) bootID() string {
	h := fnv.New64a()
	h.Write([]byte(t.M.Hostname() + t.M.Boot().String()))
	a := h.Sum64()
	h.Write([]byte("2"))
	return fmt.Sprintf("%016x%016x", a, h.Sum64())
}

// journalctl's options (journalctl(1)); true: takes a value.
var (
	journalLong = map[string]bool{
		"unit": true, "lines": true, "output": true, "since": true, "until": true, "priority": true, "boot": false,
		"no-pager": false, "quiet": false, "no-hostname": false, "reverse": false, "all": false, "catalog": false,
		"pager-end": false, "follow": false, "dmesg": false, "utc": false, "full": false, "system": false,
		"identifier": true, "list-boots": false, "disk-usage": false, "output-fields": true, "no-tail": false,
		"merge": false, "user-unit": true, "grep": true, "case-sensitive": false, "facility": true, "user": false,
	}
	journalShortVal  = "unoSUptg"
	journalShortFlag = "bqraxefklm"
	journalShort     = map[byte]string{'u': "unit", 'n': "lines", 'o': "output", 'S': "since", 'U': "until", 'p': "priority",
		't': "identifier", 'g': "grep", 'b': "boot", 'q': "quiet", 'r': "reverse", 'a': "all", 'x': "catalog",
		'e': "pager-end", 'f': "follow", 'k': "dmesg", 'l': "full", 'm': "merge"}
	priorities = []string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}
)

func (t Tools) journalctl(ctx context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	// -n and -b take an optional value: "-n 5", "-b -1", "-b 0".
	var units []string
	bootArg := ""
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case (a == "-n" || a == "--lines") && (i+1 >= len(args) || !isNumber(args[i+1])):
			rest = append(rest, "--lines=10")
		case a == "-b" || a == "--boot":
			rest = append(rest, "--boot")
			if i+1 < len(args) && (isNumber(args[i+1]) || len(args[i+1]) == 32) {
				i++
				bootArg = args[i]
			}
		case strings.HasPrefix(a, "--boot="):
			rest, bootArg = append(rest, "--boot"), strings.TrimPrefix(a, "--boot=")
		default:
			rest = append(rest, a)
		}
	}
	o, ok := parse(inv, rest, journalLong, journalShortVal, journalShortFlag, journalShort)
	if !ok {
		return 1
	}
	if o.verb != "" {
		fmt.Fprintf(inv.Stderr, "Failed to add match '%s': Invalid argument\n", o.verb)
		return 1
	}
	for _, k := range []string{"unit"} {
		if v, ok := o.flags[k]; ok {
			for _, u := range strings.Split(v, ",") {
				units = append(units, state.UnitName(u))
			}
		}
	}
	if bootArg != "" && bootArg != "0" && bootArg != t.bootID() {
		if n, err := strconv.Atoi(bootArg); err == nil {
			fmt.Fprintf(inv.Stderr, "Data from the specified boot (%+d) is not available: No data available\n", n)
		} else {
			fmt.Fprintf(inv.Stderr, "Data from the specified boot (%s) is not available: No data available\n", bootArg)
		}
		return 1
	}
	now := t.M.Now()
	if o.has("list-boots") {
		fmt.Fprintf(inv.Stdout, "IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY                 \n  0 %s %s %s\n", t.bootID(), Stamp(t.M.Boot()), Stamp(now))
		return 0
	}
	if o.has("disk-usage") {
		fmt.Fprintf(inv.Stdout, "Archived and active journals take up %.1fM in the file system.\n", t.M.Jitter(48, 0.05))
		return 0
	}
	format := "short"
	if v, ok := o.flags["output"]; ok {
		switch v {
		case "short", "short-iso", "short-precise", "short-full", "short-unix", "cat", "json", "json-pretty", "verbose", "with-unit":
			format = v
		default:
			fmt.Fprintf(inv.Stderr, "Unknown output format '%s'.\n", v)
			return 1
		}
	}
	maxPrio := 7
	if v, ok := o.flags["priority"]; ok {
		p := v
		if _, to, ok := strings.Cut(v, ".."); ok {
			p = to
		}
		n := -1
		for i, name := range priorities {
			if p == name || p == strconv.Itoa(i) {
				n = i
			}
		}
		if n < 0 {
			fmt.Fprintf(inv.Stderr, "Unknown log level %s\n", v)
			return 1
		}
		maxPrio = n
	}
	var since, until time.Time
	for k, dst := range map[string]*time.Time{"since": &since, "until": &until} {
		if v, ok := o.flags[k]; ok {
			at, ok := parseTime(v, now)
			if !ok {
				fmt.Fprintf(inv.Stderr, "Failed to parse timestamp: %s\n", v)
				return 1
			}
			*dst = at
		}
	}
	var es []entry
	switch {
	case o.has("dmesg"):
		es = t.kernelEntries()
	case len(units) > 0:
		for _, name := range units {
			if u, ok := t.M.Unit(name); ok {
				es = append(es, t.unitEntries(u)...)
			} else if timer := t.triggeredBy(name); timer != "" {
				es = append(es, t.runs(name, timer)...)
			}
		}
	default:
		es = t.kernelEntries()
		for _, u := range t.M.Units() {
			es = append(es, t.unitEntries(u)...)
		}
	}
	ident := o.flags["identifier"]
	kept := es[:0]
	for _, e := range es {
		if e.prio > maxPrio || (!since.IsZero() && e.at.Before(since)) || (!until.IsZero() && e.at.After(until)) ||
			(ident != "" && e.ident != ident) || (o.flags["grep"] != "" && !strings.Contains(e.msg, o.flags["grep"])) {
			continue
		}
		kept = append(kept, e)
	}
	es = kept
	sort.SliceStable(es, func(i, j int) bool { return es[i].at.Before(es[j].at) })
	if v, ok := o.flags["lines"]; ok {
		n, err := strconv.Atoi(strings.TrimPrefix(v, "+"))
		if err != nil {
			fmt.Fprintf(inv.Stderr, "Failed to parse lines '%s'\n", v)
			return 1
		}
		es = lastN(es, n)
	} else if o.has("pager-end") {
		es = lastN(es, 1000)
	} else if o.has("follow") {
		es = lastN(es, 10)
	}
	if o.has("reverse") {
		for i, j := 0, len(es)-1; i < j; i, j = i+1, j-1 {
			es[i], es[j] = es[j], es[i]
		}
	}
	if len(es) == 0 && !o.has("quiet") {
		fmt.Fprintln(inv.Stdout, "-- No entries --")
	}
	host := t.M.Hostname()
	for i, e := range es {
		switch format {
		case "cat":
			fmt.Fprintln(inv.Stdout, e.msg)
		case "json", "json-pretty":
			t.writeJSON(inv, e, i, format == "json-pretty")
		case "short-iso":
			fmt.Fprintln(inv.Stdout, e.short(host, true))
		case "short-precise":
			fmt.Fprintf(inv.Stdout, "%s.%06d %s %s: %s\n", e.at.Format("Jan 02 15:04:05"), (i*7919)%1000000, host, e.tag(), e.msg)
		case "short-full":
			fmt.Fprintf(inv.Stdout, "%s %s %s: %s\n", e.at.Format("Mon 2006-01-02 15:04:05 MST"), host, e.tag(), e.msg)
		case "short-unix":
			fmt.Fprintf(inv.Stdout, "%d.%06d %s %s: %s\n", e.at.Unix(), (i*7919)%1000000, host, e.tag(), e.msg)
		default:
			line := e.short(host, false)
			if o.has("no-hostname") {
				line = strings.Replace(line, " "+host+" ", " ", 1)
			}
			fmt.Fprintln(inv.Stdout, line)
		}
	}
	if o.has("follow") {
		<-ctx.Done()
		return 130
	}
	return 0
}

func (t Tools) writeJSON(inv *shell.Invocation, e entry, i int, pretty bool) {
	boot := t.bootID()
	usec := e.at.UnixMicro()
	unitField, unit := "_SYSTEMD_UNIT", e.unit
	comm, transport := e.ident, "stdout"
	if e.ident == "systemd" {
		unitField, transport = "UNIT", "journal"
	}
	if e.ident == "kernel" {
		unitField, transport, unit = "", "kernel", ""
	}
	fields := [][2]string{
		{"__CURSOR", fmt.Sprintf("s=%s;i=%x;b=%s;m=%x;t=%x;x=%x", boot[:32], 0x1000+i, boot, e.at.Sub(t.M.Boot()).Microseconds(), usec, uint64(usec)*2654435761)},
		{"__REALTIME_TIMESTAMP", strconv.FormatInt(usec, 10)},
		{"__MONOTONIC_TIMESTAMP", strconv.FormatInt(e.at.Sub(t.M.Boot()).Microseconds(), 10)},
		{"_BOOT_ID", boot},
		{"PRIORITY", strconv.Itoa(e.prio)},
		{"SYSLOG_FACILITY", "3"},
		{"SYSLOG_IDENTIFIER", e.ident},
		{"_PID", strconv.Itoa(e.pid)},
		{"_UID", "0"},
		{"_GID", "0"},
		{"_COMM", comm},
		{"_TRANSPORT", transport},
		{"_HOSTNAME", t.M.Hostname()},
		{"MESSAGE", e.msg},
	}
	if unitField != "" {
		fields = append(fields, [2]string{unitField, unit})
	}
	var b strings.Builder
	for k, f := range fields {
		key, _ := json.Marshal(f[0])
		val, _ := json.Marshal(f[1])
		switch {
		case pretty && k == 0:
			b.WriteString("{\n\t")
		case pretty:
			b.WriteString(",\n\t")
		case k == 0:
			b.WriteString("{")
		default:
			b.WriteString(",")
		}
		b.Write(key)
		if pretty {
			b.WriteString(" : ")
		} else {
			b.WriteString(":")
		}
		b.Write(val)
	}
	if pretty {
		b.WriteString("\n}")
	} else {
		b.WriteString("}")
	}
	fmt.Fprintln(inv.Stdout, b.String())
}

// parseTime reads the timestamps of systemd.time(7): "today", "yesterday", "now",
// "YYYY-MM-DD [HH:MM[:SS]]", "HH:MM[:SS]", "-1h", "+30min", "2 hours ago", "@epoch".
func parseTime(s string, now time.Time) (time.Time, bool) {
	s = strings.TrimSpace(s)
	day := now.Truncate(24 * time.Hour)
	switch s {
	case "now":
		return now, true
	case "today":
		return day, true
	case "yesterday":
		return day.Add(-24 * time.Hour), true
	case "tomorrow":
		return day.Add(24 * time.Hour), true
	}
	if n, err := strconv.ParseInt(strings.TrimPrefix(s, "@"), 10, 64); err == nil && strings.HasPrefix(s, "@") {
		return time.Unix(n, 0).UTC(), true
	}
	for _, l := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02", "2006-01-02T15:04:05Z07:00"} {
		if at, err := time.Parse(l, s); err == nil {
			return at, true
		}
	}
	for _, l := range []string{"15:04:05", "15:04"} {
		if at, err := time.Parse(l, s); err == nil {
			return day.Add(time.Duration(at.Hour())*time.Hour + time.Duration(at.Minute())*time.Minute + time.Duration(at.Second())*time.Second), true
		}
	}
	sign := time.Duration(1)
	span := s
	switch {
	case strings.HasSuffix(s, " ago"):
		sign, span = -1, strings.TrimSuffix(s, " ago")
	case strings.HasPrefix(s, "-"):
		sign, span = -1, s[1:]
	case strings.HasPrefix(s, "+"):
		span = s[1:]
	default:
		return time.Time{}, false
	}
	d, ok := parseSpan(span)
	return now.Add(sign * d), ok
}

// parseSpan reads a systemd time span ("1h 30min", "2 hours", "90s", "1d").
func parseSpan(s string) (time.Duration, bool) {
	units := map[string]time.Duration{
		"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
		"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute, "h": time.Hour, "hr": time.Hour,
		"hour": time.Hour, "hours": time.Hour, "d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
		"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
	}
	s = strings.ReplaceAll(s, " ", "")
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, false
		}
		n, _ := strconv.Atoi(s[:i])
		s = s[i:]
		j := 0
		for j < len(s) && (s[j] < '0' || s[j] > '9') {
			j++
		}
		u, ok := units[s[:j]]
		if s[:j] == "" {
			u, ok = time.Second, true
		}
		if !ok {
			return 0, false
		}
		total += time.Duration(n) * u
		s = s[j:]
	}
	return total, true
}
