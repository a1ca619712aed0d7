// Command labsim runs the lab simulator: a fake homelab that speaks real SSH, one listener
// per machine of the inventory, with HTTP and HTTPS ingress listeners and a loopback control
// API for fault injection. See package labsim.
//
// The HTTPS ingress serves a self-signed certificate kept in the state directory
// (<state-dir>/http-ca.pem, logged at start); clients trust that file as their CA
// (the scheduler's OIKOS_CHECK_CA_FILE).
//
// Flags (each has an environment twin):
//
//	--inventory FILE          LABSIM_INVENTORY        inventory YAML (default: the embedded seeds)
//	--state-dir DIR           LABSIM_STATE_DIR        host keys and sandboxes (./.local/labsim)
//	--authorized-keys FILE    LABSIM_AUTHORIZED_KEYS  accepted client keys (default: any key)
//	--control ADDR            LABSIM_CONTROL          control API ("" disables; 127.0.0.1:7070)
//	--http ADDR               LABSIM_HTTP             ingress listener (default from the fleet)
//	--https ADDR              LABSIM_HTTPS            TLS ingress listener (127.0.20.1:8443)
//	--log-level LEVEL         LABSIM_LOG_LEVEL        debug, info, warn, error (info)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/seeds"
	envconfig "github.com/oikos-hq/oikos/shared/config"
	"github.com/oikos-hq/oikos/shared/logging"
	"github.com/oikos-hq/oikos/testkit/labsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "labsim:", err)
		os.Exit(1)
	}
}

// config is the command line after flags and environment.
type config struct {
	inventory, stateDir, authorizedKeys, control, http, https, logLevel string
}

func parseConfig(args []string, getenv func(string) string) (config, error) {
	// A setting's flag defaults to its environment variable (or NAME_FILE, as the daemons
	// read theirs), else to fallback.
	def := envconfig.New(getenv).String
	var c config
	fs := flag.NewFlagSet("labsim", flag.ContinueOnError)
	fs.StringVar(&c.inventory, "inventory", def("LABSIM_INVENTORY", ""), "inventory YAML file (default: the embedded seeded inventory)")
	fs.StringVar(&c.stateDir, "state-dir", def("LABSIM_STATE_DIR", "./.local/labsim"), "directory for host keys and machine sandboxes")
	fs.StringVar(&c.authorizedKeys, "authorized-keys", def("LABSIM_AUTHORIZED_KEYS", ""), "authorized_keys file (default: accept any key)")
	fs.StringVar(&c.control, "control", def("LABSIM_CONTROL", "127.0.0.1:7070"), "control API address (empty disables it)")
	fs.StringVar(&c.http, "http", def("LABSIM_HTTP", ""), "ingress HTTP address (default: the fleet's)")
	fs.StringVar(&c.https, "https", def("LABSIM_HTTPS", labsim.DefaultHTTPSAddr), "ingress HTTPS address (same routes as --http, certificate in <state-dir>/"+labsim.CAFileName+")")
	fs.StringVar(&c.logLevel, "log-level", def("LABSIM_LOG_LEVEL", "info"), "log level")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if c.control != "" {
		if err := requireLoopback(c.control); err != nil {
			return config{}, fmt.Errorf("--control: %w", err)
		}
	}
	return c, nil
}

// requireLoopback refuses a control address that is not on 127.0.0.0/8 or ::1: the control
// API can stop machines and must never be reachable from the network.
func requireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address", addr)
	}
	return nil
}

func readAuthorizedKeys(path string) ([]ssh.PublicKey, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []ssh.PublicKey
	for len(data) > 0 {
		key, _, _, rest, err := ssh.ParseAuthorizedKey(data)
		if err != nil {
			break
		}
		keys = append(keys, key)
		data = rest
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no public key", path)
	}
	return keys, nil
}

// run starts the simulator and serves until ctx ends (SIGINT or SIGTERM in main).
func run(ctx context.Context, args []string, getenv func(string) string, logOut io.Writer) error {
	cfg, err := parseConfig(args, getenv)
	if err != nil {
		return err
	}
	log := logging.New(logOut, "labsim", cfg.logLevel)
	inv := seeds.Inventory()
	source := "embedded seeds"
	if cfg.inventory != "" {
		if inv, err = os.ReadFile(cfg.inventory); err != nil {
			return fmt.Errorf("read inventory: %w", err)
		}
		source = cfg.inventory
	}
	fleet, err := labsim.FleetFromInventory(inv)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	log.Info().Str("inventory", source).Int("hosts", len(fleet.Hosts)).Msg("fleet loaded")
	if cfg.http != "" {
		fleet.HTTPAddr = cfg.http
	}
	if cfg.https != "" {
		fleet.HTTPSAddr = cfg.https
	}
	keys, err := readAuthorizedKeys(cfg.authorizedKeys)
	if err != nil {
		return fmt.Errorf("authorized keys: %w", err)
	}
	// The command is the demo's simulator (make up): a healthy demo fleet reads healthy, so
	// the backups its inventory declares are kept fresh.
	sim, err := labsim.New(fleet, labsim.Options{
		StateDir: cfg.stateDir, AuthorizedKeys: keys, ControlAddr: cfg.control, Logger: log, FreshBackups: true,
	})
	if err != nil {
		return err
	}
	if err := sim.Start(ctx); err != nil {
		return err
	}
	for _, name := range sim.Hosts() {
		log.Info().Str("host", name).Str("addr", sim.Addr(name)).Str("host_key", ssh.FingerprintSHA256(sim.HostKey(name))).Msg("host listening")
	}
	log.Info().Str("http", sim.HTTPAddr()).Str("https", sim.HTTPSAddr()).Str("ca_file", sim.CAFile()).
		Msg("ingress listening; https clients trust ca_file")
	if sim.ControlAddr() != "" {
		log.Info().Str("addr", sim.ControlAddr()).Msg("control API listening")
	}
	<-ctx.Done()
	log.Info().Msg("stopping")
	sim.Stop()
	return nil
}
