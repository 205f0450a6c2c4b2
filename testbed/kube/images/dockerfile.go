package images

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FromDockerfile reads distributions/<dist>/Dockerfile under repoRoot and
// returns the image its final stage describes, named as the Helm chart names
// it (ChartImage). COPY sources are files of the build context, repoRoot, as in
// the Dockerfile's `docker build -f distributions/<dist>/Dockerfile .`: the
// binary must have been built (`make build`) before the image is written.
func FromDockerfile(repoRoot, dist string) (Image, error) {
	file := filepath.Join(repoRoot, "distributions", dist, "Dockerfile")
	text, err := os.ReadFile(file)
	if err != nil {
		return Image{}, err
	}
	img, err := parseDockerfile(file, string(text), repoRoot)
	if err != nil {
		return Image{}, err
	}
	if img.Name, err = ChartImage(repoRoot, dist); err != nil {
		return Image{}, err
	}
	return img, nil
}

// stageFiles are the files a COPY --from may take from an earlier stage, by
// the stage's base image: the stages are not built (no engine runs RUN), so
// each such file is the same file of this machine. The testbed runs on Debian
// 12 with the ca-certificates package, which is what the Dockerfiles' certs
// stage (debian:12-slim + ca-certificates) installs: the CA bundle is the
// same, up to the package's point release.
var stageFiles = map[string]map[string]string{
	"debian:12-slim": {"/etc/ssl/certs/ca-certificates.crt": "/etc/ssl/certs/ca-certificates.crt"},
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line    int // where it starts
	keyword string
	args    string
}

// parseDockerfile interprets the final stage of a Dockerfile. Earlier stages
// are read only for their names and base images (COPY --from), since nothing
// of them but what the final stage copies ends up in the image.
func parseDockerfile(file, text, contextDir string) (Image, error) {
	instrs := splitInstructions(text)
	final := -1
	stages := map[string]string{} // stage name -> base image
	for i, in := range instrs {
		if in.keyword == "FROM" {
			final = i
		}
	}
	if final < 0 {
		return Image{}, fmt.Errorf("%s: no FROM", file)
	}
	for _, in := range instrs[:final] {
		if in.keyword != "FROM" {
			continue
		}
		f := slices.DeleteFunc(strings.Fields(in.args), func(s string) bool { return strings.HasPrefix(s, "--") }) // --platform
		if len(f) == 3 && strings.EqualFold(f[1], "AS") {
			stages[strings.ToLower(f[2])] = f[0]
		}
	}

	img := Image{}
	workdir := "/"
	fail := func(in instruction, format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s: %s", file, in.line, in.keyword, fmt.Sprintf(format, a...))
	}
	for _, in := range instrs[final:] {
		// Docker substitutes $VARIABLES in these; this builder does not.
		if in.keyword != "ENTRYPOINT" && in.keyword != "CMD" && strings.Contains(in.args, "$") {
			return Image{}, fail(in, "variable substitution is not supported by the image builder")
		}
		switch in.keyword {
		case "FROM":
			// A static binary needs no base image; any other base would have
			// to be pulled and unpacked, which this builder does not do.
			if f := strings.Fields(in.args); len(f) == 0 || f[0] != "scratch" || (len(f) != 1 && (len(f) != 3 || !strings.EqualFold(f[1], "AS"))) {
				return Image{}, fail(in, "the final stage must be FROM scratch, got %q", in.args)
			}
		case "COPY":
			files, err := parseCopy(in.args, contextDir, workdir, stages)
			if err != nil {
				return Image{}, fail(in, "%v", err)
			}
			for _, f := range files {
				// A later COPY to the same path replaces the file.
				img.Files = slices.DeleteFunc(img.Files, func(g File) bool { return g.Path == f.Path })
				img.Files = append(img.Files, f)
			}
		case "USER":
			if len(strings.Fields(in.args)) != 1 {
				return Image{}, fail(in, "want one user[:group], got %q", in.args)
			}
			img.User = in.args
		case "EXPOSE":
			for _, p := range strings.Fields(in.args) {
				port, proto, _ := strings.Cut(p, "/")
				if proto == "" {
					proto = "tcp"
				}
				if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || (proto != "tcp" && proto != "udp" && proto != "sctp") {
					return Image{}, fail(in, "want port[/tcp|udp|sctp], got %q", p)
				}
				img.ExposedPorts = append(img.ExposedPorts, port+"/"+proto)
			}
		case "ENTRYPOINT", "CMD":
			// Only the exec form: the shell form runs /bin/sh -c, and FROM
			// scratch has no shell.
			var argv []string
			if err := json.Unmarshal([]byte(in.args), &argv); err != nil || len(argv) == 0 {
				return Image{}, fail(in, "want the exec form [\"arg\", ...] (a scratch image has no shell), got %q", in.args)
			}
			if in.keyword == "ENTRYPOINT" {
				img.Entrypoint = argv
			} else {
				img.Cmd = argv
			}
		case "ENV":
			vars, err := parseEnv(in.args)
			if err != nil {
				return Image{}, fail(in, "%v", err)
			}
			for _, kv := range vars {
				key, _, _ := strings.Cut(kv, "=")
				img.Env = slices.DeleteFunc(img.Env, func(old string) bool { return strings.HasPrefix(old, key+"=") })
				img.Env = append(img.Env, kv)
			}
		case "WORKDIR":
			workdir = path.Join(workdir, in.args)
			img.WorkingDir = workdir
		default:
			// Everything else is refused rather than ignored: an instruction
			// the image would need but the builder left out would make the
			// testbed run another image than the Dockerfile describes.
			return Image{}, fail(in, "instruction not supported by the image builder (testbed/kube/images); teach it there")
		}
	}
	return img, nil
}

// splitInstructions splits a Dockerfile into instructions: comment and blank
// lines dropped (also inside continuations, as Docker does), lines ending in a
// backslash joined with the next.
func splitInstructions(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if start == 0 {
			start = i + 1
		}
		if rest, ok := strings.CutSuffix(t, "\\"); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(t)
		keyword, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{line: start, keyword: strings.ToUpper(keyword), args: strings.TrimSpace(args)})
		cur.Reset()
		start = 0
	}
	if start != 0 {
		keyword, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, instruction{line: start, keyword: strings.ToUpper(keyword), args: strings.TrimSpace(args)})
	}
	return out
}

// parseCopy reads `COPY [--from=stage] src... dst`: sources are files of the
// build context, or of a known stage (stageFiles).
func parseCopy(args, contextDir, workdir string, stages map[string]string) ([]File, error) {
	fields := strings.Fields(args)
	from := ""
	for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
		v, ok := strings.CutPrefix(fields[0], "--from=")
		if !ok {
			return nil, fmt.Errorf("option %s not supported", fields[0])
		}
		from = v
		fields = fields[1:]
	}
	if len(fields) < 2 || strings.HasPrefix(fields[0], "[") {
		return nil, fmt.Errorf("want COPY [--from=stage] src... dst, got %q", args)
	}
	srcs, dst := fields[:len(fields)-1], fields[len(fields)-1]
	// As in Docker: into the directory when dst ends in / or there are
	// several sources; a relative dst is under WORKDIR.
	intoDir := strings.HasSuffix(dst, "/") || len(srcs) > 1
	if !path.IsAbs(dst) {
		dst = path.Join(workdir, dst)
	}
	var files []File
	for _, src := range srcs {
		if strings.ContainsAny(src, "*?[") {
			return nil, fmt.Errorf("wildcard %q not supported", src)
		}
		target := path.Clean(dst)
		if intoDir {
			target = path.Join(dst, path.Base(src))
		}
		if from == "" {
			rel := path.Clean(src)
			if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
				return nil, fmt.Errorf("source %q is outside the build context", src)
			}
			files = append(files, File{Path: target, Source: filepath.Join(contextDir, filepath.FromSlash(rel))})
			continue
		}
		base, ok := stages[strings.ToLower(from)]
		if !ok {
			return nil, fmt.Errorf("--from=%s is not an earlier stage", from)
		}
		host, ok := stageFiles[base][path.Clean(src)]
		if !ok {
			return nil, fmt.Errorf("--from=%s (%s): the builder knows no stand-in for %s on this machine (see stageFiles)", from, base, src)
		}
		files = append(files, File{Path: target, Source: host})
	}
	return files, nil
}

// parseEnv reads ENV's KEY=value pairs (values may be double-quoted) and the
// old one-variable form `ENV KEY value`.
func parseEnv(args string) ([]string, error) {
	if key, value, _ := strings.Cut(args, " "); !strings.Contains(key, "=") {
		if key == "" || strings.TrimSpace(value) == "" {
			return nil, fmt.Errorf("want KEY=value, got %q", args)
		}
		return []string{key + "=" + strings.TrimSpace(value)}, nil
	}
	var out []string
	for rest := strings.TrimSpace(args); rest != ""; rest = strings.TrimSpace(rest) {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \t\"") {
			return nil, fmt.Errorf("want KEY=value, got %q", rest)
		}
		var value string
		if strings.HasPrefix(after, `"`) {
			end := strings.Index(after[1:], `"`)
			if end < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", rest)
			}
			value, rest = after[1:1+end], after[2+end:]
		} else {
			value, rest, _ = strings.Cut(after, " ")
		}
		if strings.Contains(value, `\`) {
			return nil, fmt.Errorf("escapes in %q not supported", value)
		}
		out = append(out, key+"="+value)
	}
	return out, nil
}
