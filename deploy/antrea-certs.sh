#!/usr/bin/env bash
# Makes the certificates Antrea's agents and flowtel's gateway exchange when the
# gateway replaces Antrea's Flow Aggregator (components/antrea-flow-aggregator),
# under the names the agents read, and (with --apply) creates them:
#   Secret    <ns>/flow-aggregator-tls         tls.crt, tls.key (DNS:flow-aggregator.<ns>.svc),
#                                              ca.crt: the gateway's server certificate and the
#                                              CA it requires agents' client certificates from
#   ConfigMap <ns>/flow-aggregator-ca          ca.crt: the agents verify the gateway with it
#   Secret    <ns>/flow-aggregator-client-tls  tls.crt, tls.key: the agents' client certificate
# The agents look these up in the Namespace flow-aggregator by name; keep the default.
# For production, prefer your own PKI (docs/deploy.md).
#
# Usage: deploy/antrea-certs.sh [--apply] [--namespace flow-aggregator] [--days 365] [--out DIR]
set -euo pipefail

ns=flow-aggregator days=365 out="" apply=false
while [ $# -gt 0 ]; do
	case $1 in
	--apply) apply=true ;;
	--namespace) ns=$2; shift ;;
	--days) days=$2; shift ;;
	--out) out=$2; shift ;;
	*) echo "antrea-certs.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
out=${out:-$(mktemp -d)}
mkdir -p "$out"
cd "$out"
name=flow-aggregator.$ns.svc

openssl req -x509 -newkey rsa:3072 -nodes -days "$days" -subj "/CN=flow-aggregator CA" \
	-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
	-keyout ca.key -out ca.crt 2>/dev/null

issue() { # issue <file> <subject CN> <extensions>
	openssl req -newkey rsa:3072 -nodes -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
	openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
		-out "$1.crt" -extfile <(printf '%b' "$3") 2>/dev/null
	rm "$1.csr"
}
issue server "$name" "subjectAltName=DNS:$name,DNS:$name.cluster.local\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment"
issue client "antrea-agent-flow-exporter" "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment"
openssl verify -CAfile ca.crt server.crt client.crt >/dev/null
echo "antrea-certs.sh: certificates in $out (server name $name)" >&2

if $apply; then
	kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns"
	apply() { kubectl "$@" --namespace "$ns" --dry-run=client -o yaml | kubectl apply -f -; }
	apply create secret generic flow-aggregator-tls --from-file=tls.crt=server.crt --from-file=tls.key=server.key --from-file=ca.crt=ca.crt
	apply create configmap flow-aggregator-ca --from-file=ca.crt=ca.crt
	apply create secret tls flow-aggregator-client-tls --cert=client.crt --key=client.key
	echo "antrea-certs.sh: keep $out/ca.key safe (or delete it): it signs certificates the gateway trusts" >&2
fi
