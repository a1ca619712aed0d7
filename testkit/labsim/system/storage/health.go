package storage

import (
	"context"
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

func (t Tools) smartVersion() string {
	kernel := t.M.Kernel()
	if t.M.Distro() == "debian-13" {
		return fmt.Sprintf("smartctl 7.4 2023-08-01 r5530 [x86_64-linux-%s] (local build)\nCopyright (C) 2002-23, Bruce Allen, Christian Franke, www.smartmontools.org\n", kernel)
	}
	return fmt.Sprintf("smartctl 7.3 2022-02-28 r5338 [x86_64-linux-%s] (local build)\nCopyright (C) 2002-22, Bruce Allen, Christian Franke, www.smartmontools.org\n", kernel)
}

// smartctl answers -H, -i, -A, -a/-x and --scan for the machine's disk (smartctl(8)); its
// exit status is the bit mask the manual describes (0: healthy, 1: bad command line, 2:
// device open failed).
func (t Tools) smartctl(_ context.Context, inv *shell.Invocation) int {
	var health, info, attrs, scan bool
	var device string
	args := inv.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "-H", "--health":
			health = true
		case "-i", "--info":
			info = true
		case "-A", "--attributes":
			attrs = true
		case "-a", "--all", "-x", "--xall":
			health, info, attrs = true, true, true
		case "--scan", "--scan-open":
			scan = true
		case "-d", "--device", "-T", "--tolerance", "-n", "--nocheck":
			i++
		case "-q":
			i++
		default:
			if strings.HasPrefix(a, "-") {
				fmt.Fprintf(inv.Stdout, "%s\n=======> UNRECOGNIZED OPTION: %s\n\nUse smartctl -h to get a usage summary\n\n", t.smartVersion(), strings.TrimLeft(a, "-"))
				return 1
			}
			device = a
		}
	}
	disk := t.devices()[0]
	nvme := strings.HasPrefix(disk.name, "nvme")
	if scan {
		if nvme {
			fmt.Fprintf(inv.Stdout, "/dev/%s -d nvme # /dev/%s, NVMe device\n", disk.name, disk.name)
		} else {
			fmt.Fprintf(inv.Stdout, "/dev/%s -d scsi # /dev/%s, SCSI device\n", disk.name, disk.name)
		}
		return 0
	}
	if device == "" {
		fmt.Fprintf(inv.Stdout, "%s\nERROR: smartctl requires a device name as the final command-line argument.\n\n\nUse smartctl -h to get a usage summary\n\n", t.smartVersion())
		return 1
	}
	fmt.Fprint(inv.Stdout, t.smartVersion()+"\n")
	if device != "/dev/"+disk.name && device != "/dev/"+strings.TrimSuffix(disk.name, "n1") {
		fmt.Fprintf(inv.Stdout, "Smartctl open device: %s failed: No such device\n", device)
		return 2
	}
	if !health && !info && !attrs {
		fmt.Fprintln(inv.Stdout, "=== START OF INFORMATION SECTION ===")
		return 0
	}
	now := t.M.Now()
	hours := int(now.Sub(t.M.Boot()).Hours()) + 14000
	w := inv.Stdout
	if info {
		fmt.Fprintln(w, "=== START OF INFORMATION SECTION ===")
		if nvme {
			fmt.Fprintf(w, "Model Number:                       %s\nSerial Number:                      %s\nFirmware Version:                   5B2QGXA7\nPCI Vendor/Subsystem ID:            0x144d\nIEEE OUI Identifier:                0x002538\nTotal NVM Capacity:                 1,000,204,886,016 [1.00 TB]\nUnallocated NVM Capacity:           0\nController ID:                      6\nNVMe Version:                       1.3\nNumber of Namespaces:               1\nNamespace 1 Size/Capacity:          1,000,204,886,016 [1.00 TB]\nNamespace 1 Formatted LBA Size:     512\nLocal Time is:                      %s\n",
				disk.model, disk.serial, now.Format("Mon Jan _2 15:04:05 2006 MST"))
		} else {
			fmt.Fprintf(w, "Device Model:     %s\nSerial Number:    %s\nFirmware Version: 411010WD\nUser Capacity:    500,107,862,016 bytes [500 GB]\nSector Size:      512 bytes logical/physical\nRotation Rate:    Solid State Device\nForm Factor:      2.5 inches\nDevice is:        Not in smartctl database 7.3/5319\nATA Version is:   ACS-4 T13/BSR INCITS 529 revision 5\nSATA Version is:  SATA 3.3, 6.0 Gb/s (current: 6.0 Gb/s)\nLocal Time is:    %s\nSMART support is: Available - device has SMART capability.\nSMART support is: Enabled\n",
				disk.model, disk.serial, now.Format("Mon Jan _2 15:04:05 2006 MST"))
		}
		fmt.Fprintln(w)
	}
	if health || attrs {
		if nvme {
			fmt.Fprintln(w, "=== START OF SMART DATA SECTION ===")
		} else {
			fmt.Fprintln(w, "=== START OF READ SMART DATA SECTION ===")
		}
	}
	if health {
		fmt.Fprintln(w, "SMART overall-health self-assessment test result: PASSED")
		fmt.Fprintln(w)
	}
	if attrs && nvme {
		fmt.Fprintf(w, "SMART/Health Information (NVMe Log 0x02)\nCritical Warning:                   0x00\nTemperature:                        %d Celsius\nAvailable Spare:                    100%%\nAvailable Spare Threshold:          10%%\nPercentage Used:                    2%%\nData Units Read:                    12,345,678 [6.32 TB]\nData Units Written:                 23,456,789 [12.0 TB]\nHost Read Commands:                 123,456,789\nHost Write Commands:                234,567,890\nController Busy Time:               1,234\nPower Cycles:                       56\nPower On Hours:                     %s\nUnsafe Shutdowns:                   12\nMedia and Data Integrity Errors:    0\nError Information Log Entries:      0\nWarning  Comp. Temperature Time:    0\nCritical Comp. Temperature Time:    0\n\nError Information (NVMe Log 0x01, 16 of 64 entries)\nNo Errors Logged\n\n",
			int(t.M.Jitter(38, 0.05)), thousands(hours))
	} else if attrs {
		fmt.Fprintln(w, "SMART Attributes Data Structure revision number: 4\nVendor Specific SMART Attributes with Thresholds:\nID# ATTRIBUTE_NAME          FLAG     VALUE WORST THRESH TYPE      UPDATED  WHEN_FAILED RAW_VALUE")
		for _, a := range [][4]string{
			{"5", "Reallocated_Sector_Ct", "0x0032", "0"}, {"9", "Power_On_Hours", "0x0032", fmt.Sprint(hours)},
			{"12", "Power_Cycle_Count", "0x0032", "56"}, {"165", "Block_Erase_Count", "0x0032", "1234567"},
			{"194", "Temperature_Celsius", "0x0022", fmt.Sprintf("%d (Min/Max 20/61)", int(t.M.Jitter(36, 0.05)))},
			{"199", "UDMA_CRC_Error_Count", "0x0032", "0"}, {"233", "Media_Wearout_Indicator", "0x0032", "98"},
		} {
			fmt.Fprintf(w, "%3s %-23s %s   100   100   000    Old_age   Always       -       %s\n", a[0], a[1], a[2], a[3])
		}
		fmt.Fprintln(w)
	}
	return 0
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
