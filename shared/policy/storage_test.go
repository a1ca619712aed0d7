package policy

import (
	"testing"
)

// Principle 3 (docs/policy.md, default_policy.yaml): tools that claim or
// rewrite storage are destructive, and so is retention that deletes older
// copies; the listing and status verbs of the same tools, and their dry runs,
// stay read_only; what claims no disk and loses nothing is config_mutation.
// Each case names the manual it was written from.
func TestStoragePrinciple(t *testing.T) {
	t.Parallel()
	p := Default()
	cases := []struct {
		cmd  string
		want Class
		src  string
	}{
		// --- destructive: claims, removals, rewrites (principle storage)
		{"zpool attach tank /dev/sda /dev/sdb", Destructive, "zpool-attach(8)"},
		{"zpool replace tank /dev/sdb /dev/sdc", Destructive, "zpool-replace(8)"},
		{"zpool create -f backup raidz2 /dev/sdb /dev/sdc /dev/sdd /dev/sde", Destructive, "zpool-create(8)"},
		{"zpool detach tank /dev/sdc", Destructive, "zpool-detach(8)"},
		{"zpool remove tank mirror-1", Destructive, "zpool-remove(8)"},
		{"zpool split -R /mnt tank tank2 /dev/sdc", Destructive, "zpool-split(8)"},
		{"zpool labelclear -f /dev/sdb1", Destructive, "zpool-labelclear(8)"},
		{"zfs destroy -r rpool/data/subvol-101-disk-0", Destructive, "zfs-destroy(8)"},
		{"pvcreate /dev/sdb", Destructive, "pvcreate(8)"},
		{"vgcreate -s 8M vg1 /dev/sdd1 /dev/sde1", Destructive, "vgcreate(8)"},
		{"vgextend pve /dev/nvme1n1", Destructive, "vgextend(8)"},
		{"vgreduce --removemissing --force vg0", Destructive, "vgreduce(8)"},
		{"vgcfgrestore -f /etc/lvm/archive/vg0_00012-1.vg vg0", Destructive, "vgcfgrestore(8)"},
		{"lvm pvremove /dev/sdb", Destructive, "lvm(8)"},
		{"ceph-volume lvm batch --yes /dev/sdb /dev/sdc", Destructive, "ceph-volume-lvm(8) batch"},
		{"ceph-volume lvm zap --destroy --osd-id 3", Destructive, "ceph-volume-lvm(8) zap"},
		{"ceph-volume raw prepare --bluestore --data /dev/sdb", Destructive, "ceph-volume(8) raw prepare"},
		{"ceph orch daemon add osd atlas:/dev/sdb", Destructive, "cephadm OSD Service"},
		{"ceph orch device zap atlas /dev/sdb --force", Destructive, "cephadm OSD Service"},
		{"pveceph osd create /dev/sdc --db_dev /dev/nvme0n1", Destructive, "pveceph(1) osd create"},
		{"pveceph createosd /dev/sdb", Destructive, "pveceph(1) createosd"},
		{"pveceph destroyosd 3 --cleanup 1", Destructive, "pveceph(1) destroyosd"},
		{"pvesh create /nodes/atlas/disks/zfs --name tank --raidlevel mirror --devices /dev/sdb,/dev/sdc", Destructive, "pve-docs API /nodes/{node}/disks/zfs"},
		{"mdadm /dev/md0 --fail /dev/sdb1 --remove /dev/sdb1", Destructive, "mdadm(8) MANAGE MODE"},
		{"mdadm --grow /dev/md0 --raid-devices=3 --add /dev/sde", Destructive, "mdadm(8) GROW MODE"},
		{"mdadm /dev/md0 --replace /dev/sdb --with /dev/sdd", Destructive, "mdadm(8) --replace"},
		{"btrfs dev del missing /mnt/pool", Destructive, "btrfs-device(8)"},
		{"btrfs replace start -B /dev/sdb /dev/sdc /mnt/pool", Destructive, "btrfs-replace(8)"},
		{"cryptsetup --type luks2 luksFormat /dev/sdb", Destructive, "cryptsetup(8) luksFormat"},
		{"cryptsetup luksHeaderRestore /dev/sdb --header-backup-file /root/sdb.hdr", Destructive, "cryptsetup(8) luksHeaderRestore"},
		{"sgdisk --zap-all /dev/sdb", Destructive, "sgdisk(8)"},
		{"wipefs --all /dev/sdc", Destructive, "wipefs(8)"},
		{"proxmox-backup-manager disk initialize sdb", Destructive, "proxmox-backup-manager(1) disk initialize"},
		{"proxmox-backup-manager datastore remove store1 --destroy-data true", Destructive, "proxmox-backup-manager(1) datastore remove"},
		{"ssh atlas 'vgextend pve /dev/sdb'", Destructive, "vgextend(8), over ssh"},

		// --- destructive: retention that deletes older copies (principle retention)
		{"vzdump 101 --prune-backups keep-last=3", Destructive, "vzdump(1) --prune-backups"},
		{"vzdump --all --mode snapshot --maxfiles 2", Destructive, "vzdump(1) --maxfiles"},
		{"vzdump 101 --remove 1", Destructive, "vzdump(1) --remove"},
		{"pvesh create /nodes/atlas/vzdump --vmid 101 --prune-backups keep-daily=7,keep-weekly=4", Destructive, "pve-docs API POST /nodes/{node}/vzdump"},
		{"pvesm prune-backups local --type qemu --vmid 101 --keep-last 2", Destructive, "pvesm(1) prune-backups"},
		{"restic prune --max-unused 5%", Destructive, "restic docs, Removing backup snapshots"},
		{"restic forget --keep-daily 7 --keep-weekly 5 --prune", Destructive, "restic docs, forget policy"},
		{"restic rewrite --exclude /srv/tmp --forget latest", Destructive, "restic docs, rewrite --forget"},
		{"borgmatic --verbosity -1 --syslog-verbosity 1", Destructive, "borgmatic docs, default actions"},
		{"borgmatic prune --stats --list", Destructive, "borgmatic docs, prune action"},
		{"borgmatic borg delete ::host-2024-01-01", Destructive, "borgmatic docs, borg passthrough"},
		{"sanoid --cron --quiet", Destructive, "sanoid README --cron"},
		{"sanoid --force-prune", Destructive, "sanoid README --force-prune"},
		{"syncoid -r --delete-target-snapshots tank/data root@nas:backup/data", Destructive, "syncoid README"},
		{"zfs-auto-snapshot --destroy-only --keep=4 --label=frequent //", Destructive, "zfs-auto-snapshot(8)"},
		{"duplicity remove-all-inc-of-but-n-full 1 --force file:///srv/backup", Destructive, "duplicity(1)"},
		{"rdiff-backup remove increments --older-than 2W /srv/backup", Destructive, "rdiff-backup(1) 2.2"},
		{"rdiff-backup --remove-older-than 1Y /srv/backup", Destructive, "rdiff-backup(1)"},
		{"snapper -c home cleanup timeline", Destructive, "snapper(8) cleanup"},
		{"snapper delete-config", Destructive, "snapper(8) delete-config"},
		{"kopia snapshot delete k1f0c3a9e --delete", Destructive, "kopia snapshot delete"},
		{"proxmox-backup-manager prune-job run daily", Destructive, "proxmox-backup-manager(1) prune-job run"},
		{"proxmox-backup-client snapshot forget vm/100/2024-01-01T00:00:00Z", Destructive, "proxmox-backup-client(1)"},
		{"rsnapshot alpha", Destructive, "rsnapshot(1) retain levels"},
		{"btrbk archive /mnt/btr_backup /mnt/btr_archive", Destructive, "btrbk(1) archive"},
		{"btrbk snapshot", Destructive, "btrbk(1) snapshot"},
		{"timeshift --check --scripted", Destructive, "timeshift(1) --check"},
		{"zpool checkpoint --discard tank", Destructive, "zpool-checkpoint(8)"},

		// --- read_only: listing, status and dry runs
		{"zpool remove -n tank /dev/sdd", ReadOnly, "zpool-remove(8) -n"},
		{"zpool split -n tank tank2", ReadOnly, "zpool-split(8) -n"},
		{"zpool create -n tank mirror /dev/sdb /dev/sdc", ReadOnly, "zpool-create(8) -n"},
		{"zpool status -v tank", ReadOnly, "zpool-status(8)"},
		{"zpool iostat -v 5 3", ReadOnly, "zpool-iostat(8)"},
		{"zfs list -t snapshot -o name,used", ReadOnly, "zfs-list(8)"},
		{"vgcfgrestore -l vg0", ReadOnly, "vgcfgrestore(8) --list"},
		{"vgcreate --test vg0 /dev/sdb", ReadOnly, "lvm(8) --test"},
		{"lvscan --all", ReadOnly, "lvscan(8)"},
		{"lvm pvs -o +pv_used", ReadOnly, "lvm(8)"},
		{"ceph-volume lvm batch --report /dev/sdb /dev/sdc", ReadOnly, "ceph-volume-lvm(8) batch --report"},
		{"ceph-volume inventory --format json", ReadOnly, "ceph-volume(8) inventory"},
		{"ceph orch device ls", ReadOnly, "cephadm"},
		{"pveceph osd details 3", ReadOnly, "pveceph(1) osd details"},
		{"mdadm --examine /dev/sdb1", ReadOnly, "mdadm(8) --examine"},
		{"btrfs replace status -1 /mnt/pool", ReadOnly, "btrfs-replace(8) status"},
		{"btrfs device usage /mnt/pool", ReadOnly, "btrfs-device(8) usage"},
		{"cryptsetup luksDump /dev/sdb", ReadOnly, "cryptsetup(8) luksDump"},
		{"cryptsetup isLuks /dev/sdb", ReadOnly, "cryptsetup(8) isLuks"},
		{"pvesm prune-backups local --dry-run --keep-last 3", ReadOnly, "pvesm(1) --dry-run"},
		{"restic prune -n", ReadOnly, "restic docs, prune --dry-run"},
		{"sanoid --cron --readonly", ReadOnly, "sanoid README --readonly"},
		{"sanoid --monitor-capacity", ReadOnly, "sanoid README --monitor-capacity"},
		{"zfs-auto-snapshot -n --keep=4 //", ReadOnly, "zfs-auto-snapshot(8) --dry-run"},
		{"rdiff-backup list increments --size /srv/backup", ReadOnly, "rdiff-backup(1) 2.2"},
		{"snapper list-configs", ReadOnly, "snapper(8)"},
		{"proxmox-backup-manager disk list", ReadOnly, "proxmox-backup-manager(1)"},
		{"rsnapshot -t daily", ReadOnly, "rsnapshot(1) -t"},
		{"rsnapshot configtest", ReadOnly, "rsnapshot(1)"},
		{"btrbk dryrun", ReadOnly, "btrbk(1) dryrun"},
		{"btrbk -n prune", ReadOnly, "btrbk(1) --dry-run"},
		{"timeshift --list-snapshots", ReadOnly, "timeshift(1)"},

		// --- config_mutation: no disk claimed, nothing lost
		{"zpool offline tank /dev/sdb", ConfigMutation, "zpool-offline(8)"},
		{"zpool scrub tank", ConfigMutation, "zpool-scrub(8)"},
		{"zpool remove -s tank", ConfigMutation, "zpool-remove(8) -s cancels"},
		{"zpool checkpoint tank", ConfigMutation, "zpool-checkpoint(8)"},
		{"zpool import tank", ConfigMutation, "zpool-import(8)"},
		{"zfs snapshot -r tank/data@pre-upgrade", ConfigMutation, "zfs-snapshot(8)"},
		{"lvcreate -L 10G -n data vg0", ConfigMutation, "lvcreate(8)"},
		{"pvmove /dev/sdb", ConfigMutation, "pvmove(8)"},
		{"ceph osd out 3", ConfigMutation, "ceph(8)"},
		{"ceph orch apply osd --all-available-devices --dry-run", ConfigMutation, "cephadm --dry-run"},
		{"cryptsetup open /dev/sdb data", ConfigMutation, "cryptsetup(8) open"},
		{"mdadm --monitor --scan -f", ConfigMutation, "mdadm(8) MONITOR MODE -f is --daemonise"},
		{"mdadm --assemble --force /dev/md0 /dev/sdb1 /dev/sdc1", ConfigMutation, "mdadm(8) ASSEMBLE MODE"},
		{"vzdump 101 --prune-backups keep-all=1", ConfigMutation, "vzdump(1) keep-all"},
		{"vzdump 101 --remove 0 --prune-backups keep-last=1", ConfigMutation, "vzdump(1) --remove 0"},
		{"duplicity remove-older-than 6M file:///srv/backup", ConfigMutation, "duplicity(1) without --force only lists"},
		{"borgmatic --dry-run", ConfigMutation, "borgmatic docs, --dry-run still runs hooks"},
		{"btrbk run --preserve", ConfigMutation, "btrbk(1) --preserve"},
		{"syncoid -r tank/data root@nas:backup/data", ConfigMutation, "syncoid README"},
		{"sanoid --take-snapshots", ConfigMutation, "sanoid README"},
		{"kopia snapshot expire --all", ConfigMutation, "kopia snapshot expire: without --delete it only lists, and no read rule vouches for kopia"},
		{"proxmox-backup-manager datastore remove store1", ConfigMutation, "proxmox-backup-manager(1) without --destroy-data"},
	}

	var destructive, readOnly, config int
	for _, tc := range cases {
		switch tc.want {
		case Destructive:
			destructive++
		case ReadOnly:
			readOnly++
		case ConfigMutation:
			config++
		}
		got := p.Classify(tc.cmd, "")
		if got.Class != tc.want {
			t.Errorf("%s: %q = %s, want %s; reasons: %q", tc.src, tc.cmd, got.Class, tc.want, got.Reasons)
			continue
		}
		if tc.want != Destructive {
			continue
		}
		// The segment that made the command destructive was decided by a
		// rule of principle 3.
		var decided *Segment
		for i := range got.Segments {
			if got.Segments[i].Class == Destructive {
				decided = &got.Segments[i]
				break
			}
		}
		if decided == nil {
			t.Errorf("%s: %q is destructive but no segment is; reasons: %q", tc.src, tc.cmd, got.Reasons)
			continue
		}
		if decided.Rule == "" {
			t.Errorf("%s: %q: segment %q was decided by no rule; reasons: %q", tc.src, tc.cmd, decided.Command, got.Reasons)
			continue
		}
		if pr := p.rules.Principle(decided.Rule); pr != "storage" && pr != "retention" {
			t.Errorf("%s: %q: decided by rule %s, whose principle is %q, not storage or retention; reasons: %q",
				tc.src, tc.cmd, decided.Rule, pr, got.Reasons)
		}
		if !p.rules.HasRules(decided.Program) {
			t.Errorf("%s: %q: no rule lists program %q", tc.src, tc.cmd, decided.Program)
		}
	}
	if destructive < 15 || readOnly < 10 || config == 0 {
		t.Fatalf("the table needs at least 15 destructive, 10 read_only and some config_mutation cases; has %d, %d, %d",
			destructive, readOnly, config)
	}
}
