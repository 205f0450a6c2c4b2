#!/usr/bin/env bash
# Makes two private CAs and the certificates for node -> gateway and gateway ->
# flow stream fan-in OTLP over TLS, and (with --apply) creates the Secrets every
# deployment path in deploy/ mounts. One CA per hop's clients: the node CA signs
# only the node collectors' client certificate, which the gateway requires; the
# gateway CA signs the gateway's certificate (server towards the node collectors,
# client towards the fan-in) and the fan-in's, so the fan-in, which requires
# client certificates from the gateway CA, refuses a node collector's.
# For production, prefer your own PKI or cert-manager (docs/deploy.md).
#
# Usage: deploy/certs.sh [--apply] [--namespace flowtel] [--gateway-name flowtel-gateway]
#                        [--node-name flowtel-node] [--flowstream-name flowtel-flowstream]
#                        [--days 365] [--out DIR]
#   --gateway-name     the gateway Service name the node collectors verify:
#                      flowtel-gateway (kustomize, Operator), <fullname>-gateway (Helm)
#   --node-name        prefix of the node client Secret: flowtel-node (kustomize), <fullname>-node (Helm)
#   --flowstream-name  the flow stream fan-in's Service name: flowtel-flowstream
#                      (kustomize, Operator), <fullname>-flowstream (Helm)
# Secrets (in the namespace):
#   <gateway-name>-tls     tls.crt, tls.key (DNS:<gateway-name>.<namespace>.svc), ca.crt
#                          (the gateway CA); also the gateways' client certificate
#                          towards the fan-in
#   <gateway-name>-ca      ca.crt: the gateway CA, which the node collectors verify the
#                          gateway with, and the fan-in requires of its clients
#   <node-name>-tls        tls.crt, tls.key, ca.crt (the node CA): client certificate for mTLS
#   <node-name>-ca         ca.crt: the node CA, which the gateway requires of its clients
#   <flowstream-name>-tls  tls.crt, tls.key (DNS:<flowstream-name>.<namespace>.svc), ca.crt:
#                          the fan-in's certificate, and the CA it requires the gateways'
#                          client certificates to chain to (unused without the flow stream)
set -euo pipefail

ns=flowtel gw=flowtel-gateway node=flowtel-node fs=flowtel-flowstream days=365 out="" apply=false
while [ $# -gt 0 ]; do
	case $1 in
	--apply) apply=true ;;
	--namespace) ns=$2; shift ;;
	--gateway-name) gw=$2; shift ;;
	--node-name) node=$2; shift ;;
	--flowstream-name) fs=$2; shift ;;
	--days) days=$2; shift ;;
	--out) out=$2; shift ;;
	*) echo "certs.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
out=${out:-$(mktemp -d)}
mkdir -p "$out"
cd "$out"
name=$gw.$ns.svc

newca() { # newca <file> <subject CN>
	openssl req -x509 -newkey rsa:3072 -nodes -days "$days" -subj "/CN=$2" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
		-keyout "$1.key" -out "$1.crt" 2>/dev/null
}
newca ca "flowtel gateway CA"
newca node-ca "flowtel node CA"

issue() { # issue <file> <subject CN> <extensions> [<CA file>]
	local ca=${4:-ca}
	openssl req -newkey rsa:3072 -nodes -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
	openssl x509 -req -in "$1.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days "$days" \
		-out "$1.crt" -extfile <(printf '%b' "$3") 2>/dev/null
	rm "$1.csr"
}
# The gateway's certificate serves node collectors and, as a client
# certificate, authenticates the gateway to the flow stream fan-in.
issue gateway "$name" "subjectAltName=DNS:$name\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment"
issue node "$node" "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment" node-ca
issue flowstream "$fs.$ns.svc" "subjectAltName=DNS:$fs.$ns.svc\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment"
openssl verify -CAfile ca.crt gateway.crt flowstream.crt >/dev/null
openssl verify -CAfile node-ca.crt node.crt >/dev/null
if openssl verify -CAfile ca.crt node.crt >/dev/null 2>&1; then
	echo "certs.sh: the node certificate chains to the gateway CA" >&2
	exit 1
fi
echo "certs.sh: certificates in $out (gateway name $name)" >&2

if $apply; then
	k() { kubectl create secret "$@" --namespace "$ns" --dry-run=client -o yaml | kubectl apply -f -; }
	kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns"
	k generic "$gw-tls" --from-file=tls.crt=gateway.crt --from-file=tls.key=gateway.key --from-file=ca.crt=ca.crt
	k generic "$gw-ca" --from-file=ca.crt=ca.crt
	k generic "$node-tls" --type=kubernetes.io/tls --from-file=tls.crt=node.crt --from-file=tls.key=node.key --from-file=ca.crt=node-ca.crt
	k generic "$node-ca" --from-file=ca.crt=node-ca.crt
	k generic "$fs-tls" --from-file=tls.crt=flowstream.crt --from-file=tls.key=flowstream.key --from-file=ca.crt=ca.crt
	echo "certs.sh: keep $out/ca.key and $out/node-ca.key safe (or delete them): they sign certificates the fan-in and the gateway trust" >&2
fi
