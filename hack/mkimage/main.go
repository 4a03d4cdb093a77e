// Command mkimage builds nodenet's Linux image without Docker or a
// registry (`make image`): the agent, the CNI plugin and nodenetctl,
// built static (CGO_ENABLED=0, -trimpath) for each platform, in one layer
// at /usr/local/bin, as an OCI image index (linux/amd64, linux/arm64)
// written as an OCI layout archive that `ctr images import`, `skopeo copy
// oci-archive:…` and `crane push` take.
//
//	go run ./hack/mkimage -o bin/nodenet-image.tar -image ghcr.io/nodenet/nodenet:v0.3.0 \
//	    [-version v0.3.0] [-platforms linux/amd64,linux/arm64] [-created 2026-12-07T00:00:00Z]
//
// Reproducible: every timestamp is fixed (-created, default the HEAD
// commit's time; the layer's files at the Unix epoch), owners are 0,
// entries are in a fixed order and the build flags are fixed, so one
// commit built twice gives the same index digest (printed, and written
// beside the archive as <archive>.digest). There is no shell, package
// manager or libc in the image: nothing in it execs one.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodenet/nodenet/internal/version"
)

func main() {
	var (
		out, image, ver, platforms, created string
	)
	flag.StringVar(&out, "o", "bin/nodenet-image.tar", "the OCI archive to write")
	flag.StringVar(&image, "image", "ghcr.io/nodenet/nodenet:latest", "the image name the archive carries")
	flag.StringVar(&ver, "version", "", "the version the binaries report (default: git describe)")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "platforms of the index")
	flag.StringVar(&created, "created", "", "the images' creation time, RFC 3339 (default: the HEAD commit's time)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("mkimage: ")

	if ver == "" {
		ver = gitOutput("describe", "--always", "--dirty", "--tags")
	}
	when, err := creationTime(created)
	if err != nil {
		log.Fatal(err)
	}
	var plats []Platform
	for _, p := range strings.Split(platforms, ",") {
		pl, err := ParsePlatform(p)
		if err != nil {
			log.Fatal(err)
		}
		plats = append(plats, pl)
	}

	work, err := os.MkdirTemp("", "mkimage-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	var builds []PlatformBinaries
	for _, p := range plats {
		dir := filepath.Join(work, p.OS+"-"+p.Arch)
		start := time.Now()
		if err := buildBinaries(dir, p, ver); err != nil {
			log.Fatal(err)
		}
		log.Printf("built %s binaries in %.1fs", p, time.Since(start).Seconds())
		builds = append(builds, PlatformBinaries{Platform: p, Dir: dir})
	}
	digest, err := Write(Options{
		Out:      out,
		Image:    image,
		Version:  ver,
		Revision: gitOutput("rev-parse", "HEAD"),
		Created:  when,
		Builds:   builds,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(out+".digest", []byte(digest+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s %s\n", out, image, digest)
}

// Binaries are what the image holds, each built from ./cmd/<name>.
var Binaries = []string{"nodenet-agent", "nodenet-cni", "nodenetctl"}

// buildBinaries builds Binaries for p into dir, static and with fixed
// flags: -trimpath drops this machine's paths, -buildid= a link input
// that can differ between otherwise equal builds.
func buildBinaries(dir string, p Platform, ver string) error {
	args := []string{"build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= " + version.LinkerFlag(ver), "-o", dir + "/"}
	for _, b := range Binaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch, "GOFLAGS=-mod=readonly")
	if p.Variant != "" && p.Arch == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w", p, err)
	}
	return nil
}

// creationTime parses -created, or takes the HEAD commit's time (so a
// commit always gets the same time), or the epoch outside git.
func creationTime(s string) (time.Time, error) {
	if s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("-created: %w", err)
		}
		return t.UTC(), nil
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		var sec int64
		if _, err := fmt.Sscan(v, &sec); err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	if v := gitOutput("log", "-1", "--format=%ct"); v != "" {
		var sec int64
		if _, err := fmt.Sscan(v, &sec); err == nil {
			return time.Unix(sec, 0).UTC(), nil
		}
	}
	return time.Unix(0, 0).UTC(), nil
}

// gitOutput runs git and returns its trimmed output, "" on failure.
func gitOutput(args ...string) string {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
