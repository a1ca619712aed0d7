package proxmox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// This file renders Proxmox command output exactly as docs/proxmox.md describes it. The
// functions are pure so that the byte-exact formats are tested on their own.

// pctRow is one line of `pct list`.
type pctRow struct {
	VMID   int
	Status string
	Lock   string
	Name   string
}

// formatPctList prints `pct list`: printf "%-10s %-10s %-12s %-20s\n" with a header, rows by
// numeric vmid, and nothing at all when there are no containers.
func formatPctList(rows []pctRow) string {
	if len(rows) == 0 {
		return ""
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].VMID < rows[j].VMID })
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %-10s %-12s %-20s\n", "VMID", "Status", "Lock", "Name")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-10s %-10s %-12s %-20s\n", strconv.Itoa(r.VMID), r.Status, r.Lock, r.Name)
	}
	return b.String()
}

// qmRow is one line of `qm list`.
type qmRow struct {
	VMID       int
	Name       string
	Status     string
	MemMB      int
	BootDiskGB float64
	PID        int
}

// formatQmList prints `qm list`: printf "%10s %-20s %-10s %-10s %12s %-10s\n", the boot disk
// with two decimals, PID 0 when stopped, nothing at all when there are no VMs.
func formatQmList(rows []qmRow) string {
	if len(rows) == 0 {
		return ""
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].VMID < rows[j].VMID })
	var b strings.Builder
	fmt.Fprintf(&b, "%10s %-20s %-10s %-10s %12s %-10s\n", "VMID", "NAME", "STATUS", "MEM(MB)", "BOOTDISK(GB)", "PID")
	for _, r := range rows {
		fmt.Fprintf(&b, "%10s %-20s %-10s %-10s %12s %-10s\n", strconv.Itoa(r.VMID), r.Name, r.Status,
			strconv.Itoa(r.MemMB), strconv.FormatFloat(r.BootDiskGB, 'f', 2, 64), strconv.Itoa(r.PID))
	}
	return b.String()
}

// template is one container template in a host's cache.
type template struct {
	Volid  string
	SizeMB float64
}

// formatPveamList prints `pveam list <storage>`: the header always ("%-60s %-6s"), then
// "%-60s %-4.2fMB" per template.
func formatPveamList(ts []template) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-60s %-6s\n", "NAME", "SIZE")
	for _, t := range ts {
		fmt.Fprintf(&b, "%-60s %-4.2fMB\n", t.Volid, t.SizeMB)
	}
	return b.String()
}

// guestExecResult is what the QEMU guest agent reports for a finished command.
type guestExecResult struct {
	ExitCode     int
	Stdout       []byte
	Stderr       []byte
	OutTruncated bool
	ErrTruncated bool
}

// formatGuestExec prints the result as qm does: Perl JSON pretty and canonical (3-space
// indent, " : ", sorted keys, booleans as 1/0, keys omitted when empty).
func formatGuestExec(r guestExecResult) string {
	type kv struct {
		k string
		v string
	}
	var kvs []kv
	if len(r.Stderr) > 0 {
		kvs = append(kvs, kv{"err-data", perlJSONString(r.Stderr)}, kv{"err-truncated", boolNum(r.ErrTruncated)})
	}
	kvs = append(kvs, kv{"exitcode", strconv.Itoa(r.ExitCode)}, kv{"exited", "1"})
	if len(r.Stdout) > 0 {
		kvs = append(kvs, kv{"out-data", perlJSONString(r.Stdout)}, kv{"out-truncated", boolNum(r.OutTruncated)})
	}
	var b strings.Builder
	b.WriteString("{\n")
	for i, e := range kvs {
		fmt.Fprintf(&b, "   %q : %s", e.k, e.v)
		if i < len(kvs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.String()
}

// formatGuestExecPid prints the answer of a qm guest exec whose --timeout ran out.
func formatGuestExecPid(pid int) string {
	return fmt.Sprintf("{\n   \"pid\" : %d\n}\n", pid)
}

func boolNum(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// perlJSONString escapes bytes as Perl's JSON module does for a byte string: quote,
// backslash and control characters are escaped (\b \f \n \r \t or \u00XX), every other
// byte — including bytes that are not valid UTF-8 — is written through unchanged.
func perlJSONString(data []byte) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range data {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// perlPretty renders a JSON value (from encoding/json types) as Perl JSON pretty+canonical.
func perlPretty(v any) string {
	var b strings.Builder
	writePerlPretty(&b, v, 0)
	b.WriteByte('\n')
	return b.String()
}

func writePerlPretty(b *strings.Builder, v any, depth int) {
	pad := strings.Repeat("   ", depth+1)
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			b.WriteString("{}")
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("{\n")
		for i, k := range keys {
			b.WriteString(pad)
			b.WriteString(perlJSONString([]byte(k)))
			b.WriteString(" : ")
			writePerlPretty(b, t[k], depth+1)
			if i < len(keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(strings.Repeat("   ", depth))
		b.WriteByte('}')
	case []any:
		if len(t) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, e := range t {
			b.WriteString(pad)
			writePerlPretty(b, e, depth+1)
			if i < len(t)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(strings.Repeat("   ", depth))
		b.WriteByte(']')
	case string:
		b.WriteString(perlJSONString([]byte(t)))
	case bool:
		b.WriteString(boolNum(t))
	case nil:
		b.WriteString("null")
	default:
		data, err := json.Marshal(t)
		if err != nil {
			b.WriteString("null")
			return
		}
		b.Write(data)
	}
}

// compactJSON renders v as one line with sorted keys (pvesh --output-format json).
func compactJSON(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// configLines renders `pct config` / `qm config`: sorted "key: value" lines, raw lxc.*
// lines last, description percent-encoded.
func configLines(kv map[string]string) string {
	var keys, raw []string
	for k := range kv {
		if strings.HasPrefix(k, "lxc.") {
			raw = append(raw, k)
		} else {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	sort.Strings(raw)
	var b strings.Builder
	for _, k := range append(keys, raw...) {
		v := kv[k]
		if k == "description" {
			v = percentEncode(v)
		}
		fmt.Fprintf(&b, "%s: %s\n", k, v)
	}
	return b.String()
}

// percentEncode encodes the characters a PVE config value cannot hold (newline, %, and
// other control characters).
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '%' || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// round2 rounds to two decimals (sizes in MB).
func round2(f float64) float64 { return math.Round(f*100) / 100 }
