{{/*
The chart name (app.kubernetes.io/name).
*/}}
{{- define "waggle.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name, the prefix of every resource name. Truncated to 63 characters (DNS label). A release whose
name already contains the chart name is used as is.
*/}}
{{- define "waggle.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The sync CronJob's name: at most 52 characters, since its Jobs append 11.
*/}}
{{- define "waggle.syncName" -}}
{{- printf "%s-sync" (include "waggle.fullname" . | trunc 47 | trimSuffix "-") }}
{{- end }}

{{- define "waggle.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every resource.
*/}}
{{- define "waggle.labels" -}}
helm.sh/chart: {{ include "waggle.chart" . }}
{{ include "waggle.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "waggle.selectorLabels" -}}
app.kubernetes.io/name: {{ include "waggle.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The proxy pods' labels, as the Service, the PDB and the ServiceMonitor select them. The component keeps the
sync's pods out of the Service.
*/}}
{{- define "waggle.proxySelectorLabels" -}}
{{ include "waggle.selectorLabels" . }}
app.kubernetes.io/component: proxy
{{- end }}

{{- define "waggle.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "waggle.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "waggle.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}

{{- define "waggle.syncImage" -}}
{{- printf "%s:%s" .Values.syncImage.repository (.Values.syncImage.tag | default .Chart.AppVersion | toString) }}
{{- end }}

{{/*
Inline SSH material given (privateKeys or knownHosts): "true" or "".
*/}}
{{- define "waggle.sshInline" -}}
{{- if or .Values.ssh.privateKeys .Values.ssh.knownHosts }}true{{ end }}
{{- end }}

{{/*
The Secret mounted at /etc/waggle/ssh/: the existing one, or the chart's when inline content is given, or "".
*/}}
{{- define "waggle.sshSecretName" -}}
{{- if and .Values.ssh.existingSecret (include "waggle.sshInline" .) }}
{{- fail "ssh: give either existingSecret or inline privateKeys/knownHosts, not both" }}
{{- end }}
{{- if .Values.ssh.existingSecret }}
{{- .Values.ssh.existingSecret }}
{{- else if include "waggle.sshInline" . }}
{{- printf "%s-ssh" (include "waggle.fullname" . | trunc 59 | trimSuffix "-") }}
{{- end }}
{{- end }}

{{/*
The server file, as YAML. User keys (values.server) win, except port and endpoint.port, which always come from
the Service's ports so that the Service, the probes and the server agree.
*/}}
{{- define "waggle.serverConfig" -}}
{{- $server := deepCopy (.Values.server | default dict) }}
{{- $chart := dict "hot-reload" .Values.hotReload "shutdown-delay" .Values.drain.shutdownDelaySeconds "thrift-server-stop-timeout-val-in-seconds" .Values.drain.graceSeconds }}
{{- range $key, $value := $chart }}
{{- if not (hasKey $server $key) }}
{{- $_ := set $server $key $value }}
{{- end }}
{{- end }}
{{- if .Values.admin.existingSecret }}
{{- $admin := deepCopy (get $server "admin" | default dict) }}
{{- if not (hasKey $admin "token-file") }}
{{- $_ := set $admin "token-file" (printf "/etc/waggle/admin/%s" .Values.admin.existingSecretKey) }}
{{- end }}
{{- $_ := set $server "admin" $admin }}
{{- end }}
{{- $sec := .Values.security }}
{{- $props := deepCopy (get $server "configuration-properties" | default dict) }}
{{- if $sec.kerberos.keytabSecret }}
{{- if not $sec.kerberos.principal }}
{{- fail "security.kerberos.principal: waggle's principal is needed with security.kerberos.keytabSecret" }}
{{- end }}
{{- $krb := dict "hive.metastore.sasl.enabled" $sec.kerberos.sasl "hive.metastore.kerberos.principal" $sec.kerberos.principal "hive.metastore.kerberos.keytab.file" (printf "/etc/waggle/kerberos/%s" $sec.kerberos.keytabKey) }}
{{- range $key, $value := $krb }}
{{- if not (hasKey $props $key) }}
{{- $_ := set $props $key $value }}
{{- end }}
{{- end }}
{{- end }}
{{- if $props }}
{{- $_ := set $server "configuration-properties" $props }}
{{- end }}
{{- if $sec.tokens.signingKeySecret }}
{{- $tokens := deepCopy (get $server "delegation-tokens" | default dict) }}
{{- if not (hasKey $tokens "signing-key-file") }}
{{- $_ := set $tokens "signing-key-file" (printf "/etc/waggle/tokens/%s" $sec.tokens.signingKeyKey) }}
{{- end }}
{{- $_ := set $server "delegation-tokens" $tokens }}
{{- end }}
{{- if $sec.tls.secret }}
{{- $tls := deepCopy (get $server "tls" | default dict) }}
{{- $files := dict "certificate-file" "/etc/waggle/tls/tls.crt" "key-file" "/etc/waggle/tls/tls.key" }}
{{- if $sec.tls.clientCertificates }}
{{- $_ := set $files "client-ca-file" "/etc/waggle/tls/ca.crt" }}
{{- end }}
{{- range $key, $value := $files }}
{{- if not (hasKey $tls $key) }}
{{- $_ := set $tls $key $value }}
{{- end }}
{{- end }}
{{- $_ := set $server "tls" $tls }}
{{- end }}
{{- $_ := set $server "port" .Values.service.thriftPort }}
{{- $endpoint := deepCopy (get $server "endpoint" | default dict) }}
{{- $_ := set $endpoint "port" .Values.service.httpPort }}
{{- $_ := set $server "endpoint" $endpoint }}
{{- if .Values.icebergRest.enabled }}
{{- $rest := deepCopy (get $server "iceberg-rest" | default dict) }}
{{- $_ := set $rest "port" .Values.service.icebergRestPort }}
{{- $_ := set $server "iceberg-rest" $rest }}
{{- end }}
{{- toYaml $server }}
{{- end }}

{{/*
The server file's hot-reload, as waggle reads it (values.server may override values.hotReload): "true" or "".
*/}}
{{- define "waggle.hotReload" -}}
{{- $server := include "waggle.serverConfig" . | fromYaml }}
{{- if not (has (index $server "hot-reload" | toString | lower) (list "false" "no" "off" "0")) }}true{{ end }}
{{- end }}

{{/*
The sync file, as YAML: values.sync.config, with federation-config defaulting to the proxy's federation file.
*/}}
{{- define "waggle.syncConfig" -}}
{{- $sync := deepCopy (.Values.sync.config | default dict) }}
{{- if not (get $sync "jobs") }}
{{- fail "sync.config.jobs: at least one job is needed when sync.enabled is true (see docs/reference/sync-configuration.md)" }}
{{- end }}
{{- if not (get $sync "federation-config") }}
{{- $_ := set $sync "federation-config" "/etc/waggle/waggle-federation.yml" }}
{{- end }}
{{- if and .Values.sync.follow.enabled (not (hasKey $sync "http-port")) }}
{{- $_ := set $sync "http-port" .Values.sync.follow.httpPort }}
{{- end }}
{{- toYaml $sync }}
{{- end }}

{{/*
The proxy's and the check init container's mounts: the configuration directory, SSH and admin Secrets when
configured, and /tmp.
*/}}
{{- define "waggle.proxyVolumeMounts" -}}
- name: config
  mountPath: /etc/waggle
  readOnly: true
{{- if include "waggle.sshSecretName" . }}
- name: ssh
  mountPath: /etc/waggle/ssh
  readOnly: true
{{- end }}
{{- if .Values.admin.existingSecret }}
- name: admin
  mountPath: /etc/waggle/admin
  readOnly: true
{{- end }}
{{- with .Values.security }}
{{- if .kerberos.keytabSecret }}
- name: kerberos
  mountPath: /etc/waggle/kerberos
  readOnly: true
{{- end }}
{{- if .kerberos.krb5ConfigMap }}
- name: krb5
  mountPath: /etc/waggle/krb5
  readOnly: true
{{- end }}
{{- if .tokens.signingKeySecret }}
- name: tokens
  mountPath: /etc/waggle/tokens
  readOnly: true
{{- end }}
{{- if .tls.secret }}
- name: tls
  mountPath: /etc/waggle/tls
  readOnly: true
{{- end }}
{{- range .extraSecrets }}
- name: secret-{{ . }}
  mountPath: /etc/waggle/secrets/{{ . }}
  readOnly: true
{{- end }}
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end }}


{{/*
The proxy's and the check init container's Secret and ConfigMap volumes for Kerberos, tokens and TLS.
*/}}
{{- define "waggle.securityVolumes" -}}
{{- with .Values.security }}
{{- if .kerberos.keytabSecret }}
- name: kerberos
  secret:
    secretName: {{ .kerberos.keytabSecret }}
    defaultMode: 256  # 0400
    items:
      - key: {{ .kerberos.keytabKey }}
        path: {{ .kerberos.keytabKey }}
{{- end }}
{{- if .kerberos.krb5ConfigMap }}
- name: krb5
  configMap:
    name: {{ .kerberos.krb5ConfigMap }}
{{- end }}
{{- if .tokens.signingKeySecret }}
- name: tokens
  secret:
    secretName: {{ .tokens.signingKeySecret }}
    defaultMode: 256  # 0400
    items:
      - key: {{ .tokens.signingKeyKey }}
        path: {{ .tokens.signingKeyKey }}
{{- end }}
{{- if .tls.secret }}
- name: tls
  secret:
    secretName: {{ .tls.secret }}
    defaultMode: 256  # 0400
{{- end }}
{{- range .extraSecrets }}
- name: secret-{{ . }}
  secret:
    secretName: {{ . }}
    defaultMode: 256  # 0400
{{- end }}
{{- end }}
{{- end }}

{{/*
The proxy's and the check init container's environment: KRB5_CONFIG when a krb5.conf ConfigMap is given, then
values.extraEnv.
*/}}
{{/*
WAGGLE_WORKERS: values.workers, else the pod's CPU (the container's limits.cpu, else its requests.cpu,
rounded up by the Downward API), else auto.
*/}}
{{- define "waggle.workersEnv" -}}
- name: WAGGLE_WORKERS
{{- $limits := .Values.resources.limits | default dict }}
{{- $requests := .Values.resources.requests | default dict }}
{{- if .Values.workers }}
  value: {{ .Values.workers | quote }}
{{- else if or $limits.cpu $requests.cpu }}
  valueFrom:
    resourceFieldRef:
      containerName: waggle
      resource: {{ ternary "limits.cpu" "requests.cpu" (not (empty $limits.cpu)) }}
      divisor: "1"
{{- else }}
  value: auto
{{- end }}
{{- end }}

{{- define "waggle.proxyEnv" -}}
{{- if .Values.security.kerberos.krb5ConfigMap }}
- name: KRB5_CONFIG
  value: /etc/waggle/krb5/krb5.conf
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The sync's mounts (the CronJob's and the follower's): the configuration directory, the sync file's directory
(a directory mount: kubelet's updates reach a running follower, which applies them), and the Secrets the proxy
uses to reach metastores (SSH, waggle's keytab, krb5.conf, TLS material), and /tmp.
*/}}
{{- define "waggle.syncVolumeMounts" -}}
- name: config
  mountPath: /etc/waggle
  readOnly: true
- name: sync
  mountPath: /etc/waggle/sync
  readOnly: true
{{- if include "waggle.sshSecretName" . }}
- name: ssh
  mountPath: /etc/waggle/ssh
  readOnly: true
{{- end }}
{{- with .Values.security }}
{{- if .kerberos.keytabSecret }}
- name: kerberos
  mountPath: /etc/waggle/kerberos
  readOnly: true
{{- end }}
{{- if .kerberos.krb5ConfigMap }}
- name: krb5
  mountPath: /etc/waggle/krb5
  readOnly: true
{{- end }}
{{- if .tls.secret }}
- name: tls
  mountPath: /etc/waggle/tls
  readOnly: true
{{- end }}
{{- range .extraSecrets }}
- name: secret-{{ . }}
  mountPath: /etc/waggle/secrets/{{ . }}
  readOnly: true
{{- end }}
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end }}

{{/*
The sync's volumes, matching waggle.syncVolumeMounts.
*/}}
{{- define "waggle.syncVolumes" -}}
{{- $sshSecret := include "waggle.sshSecretName" . }}
- name: config
  configMap:
    name: {{ include "waggle.fullname" . }}
- name: sync
  configMap:
    name: {{ include "waggle.syncName" . }}
{{- if $sshSecret }}
- name: ssh
  secret:
    secretName: {{ $sshSecret }}
    defaultMode: 256  # 0400: read by the owner (and, with fsGroup, by the group)
{{- end }}
{{- with include "waggle.securityVolumes" . }}
{{ . }}
{{- end }}
- name: tmp
  emptyDir: {}
{{- end }}

{{/*
The sync container's arguments after `waggle sync`: the sync file, and the server file when waggle's keytab is
mounted (the sync logs in to Kerberized metastores with it).
*/}}
{{- define "waggle.syncArgs" -}}
- --config
- /etc/waggle/sync/sync.yml
{{- if .Values.security.kerberos.keytabSecret }}
- --server-config
- /etc/waggle/waggle-server.yml
{{- end }}
- --no-progress
{{- end }}

{{/*
The sync container's environment: Spark writes only under /tmp; KRB5_CONFIG and the user's extra variables.
*/}}
{{- define "waggle.syncEnv" -}}
- name: HOME
  value: /tmp
- name: SPARK_LOCAL_DIRS
  value: /tmp
- name: JAVA_TOOL_OPTIONS
  value: -Djava.io.tmpdir=/tmp
{{- if .Values.security.kerberos.krb5ConfigMap }}
- name: KRB5_CONFIG
  value: /etc/waggle/krb5/krb5.conf
{{- end }}
{{- with .Values.sync.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
