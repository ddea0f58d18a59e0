# Sourced by deploy/*/build: the Docker checks and the image build both
# builds share. The caller defines die.

command -v docker >/dev/null || die "docker CLI not found (install docker.io)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker engine reachable (start dockerd, or set DOCKER_HOST)"

# The legacy builder is all a registry-less engine 20.10 offers; BuildKit
# without buildx cannot run here. The production build uses whatever the
# operator's docker has.
build_image() {
	if docker buildx version >/dev/null 2>&1; then
		docker build "$@"
	else
		DOCKER_BUILDKIT=0 docker build "$@" 2> >(grep -v -e 'DEPRECATED' -e 'legacy builder' -e 'BuildKit' -e 'buildx' -e 'environment-variable' -e '^ *$' >&2)
	fi
}
