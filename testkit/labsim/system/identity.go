package system

import (
	"context"
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

const darwinVersion = "Darwin Kernel Version 24.1.0: Thu Oct 10 21:02:27 PDT 2024; root:xnu-11215.41.3~2/RELEASE_ARM64_T8103"

func (m *Machine) kernelRelease() string {
	switch m.cfg.Role {
	case RoleDarwin:
		return "24.1.0"
	case RoleProxmox, RoleLXC:
		return "6.8.12-4-pve"
	}
	if strings.HasPrefix(m.cfg.Distro, "ubuntu") {
		return "6.8.0-49-generic"
	}
	if m.cfg.Distro == "debian-13" {
		return "6.12.48+deb13-amd64"
	}
	return "6.1.0-28-amd64"
}

func (m *Machine) kernelVersion() string {
	switch m.cfg.Role {
	case RoleDarwin:
		return darwinVersion
	case RoleProxmox, RoleLXC:
		return "#1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4 (2024-11-06T15:04Z)"
	}
	if strings.HasPrefix(m.cfg.Distro, "ubuntu") {
		return "#49-Ubuntu SMP PREEMPT_DYNAMIC Sun Nov  3 21:21:58 UTC 2024"
	}
	if m.cfg.Distro == "debian-13" {
		return "#1 SMP PREEMPT_DYNAMIC Debian 6.12.48-1 (2025-09-20)"
	}
	return "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)"
}

func (m *Machine) uname(_ context.Context, inv *shell.Invocation) int {
	sys, machine := "Linux", "x86_64"
	if m.IsDarwin() {
		sys, machine = "Darwin", "arm64"
	}
	fields := map[rune]string{'s': sys, 'n': m.cfg.Hostname, 'r': m.kernelRelease(), 'v': m.kernelVersion(), 'm': machine, 'p': machine, 'i': machine, 'o': "GNU/Linux"}
	if m.IsDarwin() {
		fields['p'], fields['o'] = "arm", "Darwin"
	}
	var want []rune
	for _, a := range inv.Args[1:] {
		switch a {
		case "--kernel-name":
			want = append(want, 's')
		case "--nodename":
			want = append(want, 'n')
		case "--kernel-release":
			want = append(want, 'r')
		case "--machine":
			want = append(want, 'm')
		case "--all":
			want = append(want, 'a')
		default:
			if !strings.HasPrefix(a, "-") {
				fmt.Fprintf(inv.Stderr, "uname: extra operand '%s'\n", a)
				return 1
			}
			want = append(want, []rune(a[1:])...)
		}
	}
	if len(want) == 0 {
		want = []rune{'s'}
	}
	order := []rune{'s', 'n', 'r', 'v', 'm', 'p', 'i', 'o'}
	if m.IsDarwin() {
		order = []rune{'s', 'n', 'r', 'v', 'm'}
	}
	set := map[rune]bool{}
	for _, w := range want {
		if w == 'a' {
			for _, o := range order {
				set[o] = true
			}
			if !m.IsDarwin() {
				set['p'], set['i'] = false, false
			}
			continue
		}
		set[w] = true
	}
	var out []string
	for _, o := range order {
		if set[o] {
			out = append(out, fields[o])
		}
	}
	fmt.Fprintln(inv.Stdout, strings.Join(out, " "))
	return 0
}

func (m *Machine) whoami(_ context.Context, inv *shell.Invocation) int {
	fmt.Fprintln(inv.Stdout, m.cfg.User)
	return 0
}

func (m *Machine) lsbRelease(_ context.Context, inv *shell.Invocation) int {
	rel := osRelease(m.cfg.Distro)
	get := func(k string) string {
		for _, l := range strings.Split(rel, "\n") {
			if v, ok := strings.CutPrefix(l, k+"="); ok {
				return strings.Trim(v, `"`)
			}
		}
		return ""
	}
	fmt.Fprintf(inv.Stdout, "Distributor ID:\t%s\nDescription:\t%s\nRelease:\t%s\nCodename:\t%s\n",
		map[string]string{"debian": "Debian", "ubuntu": "Ubuntu"}[get("ID")], get("PRETTY_NAME"), get("VERSION_ID"), get("VERSION_CODENAME"))
	return 0
}

func (m *Machine) swVers(_ context.Context, inv *shell.Invocation) int {
	fmt.Fprint(inv.Stdout, "ProductName:\t\tmacOS\nProductVersion:\t\t15.1\nBuildVersion:\t\t24B83\n")
	return 0
}
