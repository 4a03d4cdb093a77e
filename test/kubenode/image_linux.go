package kubenode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// ImageName is the repository the harness's images are called, so no
// kubelet ever tries to pull them from a real registry.
const ImageName = "nodenet.test/nodenet"

// BuildImage builds nodenet's image the way `make image` does
// (hack/mkimage), for this machine's platform only, into dir, its
// binaries reporting version; it returns the archive and the image
// reference it carries (ImageName:version).
func BuildImage(ctx context.Context, dir, version string) (archive, ref string, err error) {
	root, err := repoRoot(ctx)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	archive = filepath.Join(dir, "nodenet-image-"+version+".tar")
	ref = ImageName + ":" + version
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/mkimage", "-o", archive, "-image", ref,
		"-version", version, "-platforms", "linux/"+runtime.GOARCH)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("make image: %w: %s", err, out)
	}
	return archive, ref, nil
}

// repoRoot is the nodenet module's directory.
func repoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the nodenet module")
	}
	return filepath.Dir(mod), nil
}

// DeployDir is the repository's deploy/.
func DeployDir(ctx context.Context) (string, error) {
	root, err := repoRoot(ctx)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "deploy"), nil
}
