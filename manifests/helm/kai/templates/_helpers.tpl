{{/* The kaid image: <global.registry>/<image.name>:<global.tag or appVersion>. */}}
{{- define "kai.image" -}}
{{- $tag := .Values.global.tag | default .Chart.AppVersion -}}
{{- if .Values.global.registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" .Values.global.registry) .Values.image.name $tag -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.name $tag -}}
{{- end -}}
{{- end -}}

{{/* Labels of one component's objects; the argument is the component's name. */}}
{{- define "kai.labels" -}}
app.kubernetes.io/name: {{ . }}
app.kubernetes.io/part-of: kai
{{- end -}}

{{/* Pod spec fields every kai Deployment shares: pull secrets, placement, priority, non-root. */}}
{{- define "kai.podCommon" -}}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.global.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.global.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.global.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.global.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- include "kai.podSecurityContext" . }}
{{- end -}}

{{- define "kai.podSecurityContext" }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* A container that cannot write its image or gain privileges. */}}
{{- define "kai.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
{{- end -}}

{{/* runtimeClassName the webhook gives shared-GPU pods: KAI's gpuFractionRuntimeClassName wins over
     its older gpuPodRuntimeClassName, as in KAI. */}}
{{- define "kai.gpuPodRuntimeClassName" -}}
{{- if hasKey .Values.admission "gpuFractionRuntimeClassName" -}}
{{- .Values.admission.gpuFractionRuntimeClassName -}}
{{- else -}}
{{- .Values.admission.gpuPodRuntimeClassName -}}
{{- end -}}
{{- end -}}

{{/* runtimeClassName of reservation pods: global.resourceReservation's, else KAI's binder.runtimeClassName. */}}
{{- define "kai.reservationRuntimeClassName" -}}
{{- .Values.global.resourceReservation.runtimeClassName | default (dig "runtimeClassName" "" (.Values.binder | default dict)) -}}
{{- end -}}

{{/* kaid's config file: what the KAI-named values stand for, overridden by .Values.config. */}}
{{- define "kai.config" -}}
{{- $derived := dict
  "defaultQueue" .Values.defaultQueue.childName
  "placement" (dict "gpu" .Values.scheduler.placementStrategy "cpu" .Values.scheduler.placementStrategy)
  "leaderElection" (dict "enabled" .Values.global.leaderElection "namespace" .Release.Namespace "name" (include "kai.leaseName" .))
  "partitionLabelValue" .Values.scheduler.partitionLabelValue
  "metricsPort" .Values.scheduler.ports.metricsPort
  "gpuSharing" (dict
    "enabled" .Values.global.gpuSharing
    "reservationNamespace" .Values.global.resourceReservation.namespace
    "reservationServiceAccount" .Values.global.resourceReservation.serviceAccount
    "reservationAppLabel" .Values.global.resourceReservation.appLabel
    "reservationRuntimeClassName" (include "kai.reservationRuntimeClassName" .)
    "reservationImage" (include "kai.image" .)
    "runtimeClassName" (include "kai.gpuPodRuntimeClassName" .)
    "cdi" .Values.admission.cdi)
  "webhook" (dict "namespace" .Release.Namespace "port" .Values.admission.ports.webhookPort)
-}}
{{- if .Values.global.nodePoolLabelKey }}
{{- $_ := set $derived "nodePoolLabelKey" .Values.global.nodePoolLabelKey }}
{{- end }}
{{- toYaml (mustMergeOverwrite $derived (deepCopy .Values.config)) -}}
{{- end -}}

{{/* The scheduler's leader-election lease: one per scheduling shard, so that two shards' schedulers both act. */}}
{{- define "kai.leaseName" -}}
{{- if .Values.scheduler.partitionLabelValue -}}
kai-scheduler-{{ .Values.scheduler.partitionLabelValue | lower | replace "_" "-" | replace "." "-" | trunc 49 | trimSuffix "-" }}
{{- else -}}
kai-scheduler
{{- end -}}
{{- end -}}


{{/* The scheduler name the webhook configurations match pods by (kaid's config says which). */}}
{{- define "kai.schedulerName" -}}
{{- .Values.config.schedulerName | default "kai-scheduler" -}}
{{- end -}}

{{/* Which pods the pod webhooks see: kai's scheduler's that ask for a GPU share, outside kube-system. */}}
{{- define "kai.sharedGpuPodsOfKai" -}}
matchConditions:
  - name: scheduled-by-kai
    expression: "object.spec.schedulerName == '{{ include "kai.schedulerName" . }}'"
  - name: asks-for-a-gpu-share
    expression: "has(object.metadata.annotations) && ('gpu-fraction' in object.metadata.annotations || 'gpu-memory' in object.metadata.annotations)"
namespaceSelector:
  matchExpressions:
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}
{{- end -}}

{{/* One scheduler: its config file (ConfigMap) and its Deployment. The argument is the chart's context with the
     scheduler's own values and .Component, the name of its objects (kai-scheduler, or kai-scheduler-<shard>). */}}
{{- define "kai.schedulerConfigMap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Component }}-config
  namespace: {{ .Release.Namespace }}
  labels: {{- include "kai.labels" .Component | nindent 4 }}
data:
  # Validated by kaid at start (kaid/api/config.py); a bad value stops it with a message naming the field.
  config.yaml: |
    {{- include "kai.config" . | nindent 4 }}
{{- end -}}

{{- define "kai.schedulerDisruptionBudget" -}}
{{- if and .Values.scheduler.podDisruptionBudget.enabled (gt (int .Values.scheduler.replicas) 1) }}
# A drain never takes every scheduler pod at once.
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .Component }}
  namespace: {{ .Release.Namespace }}
  labels: {{- include "kai.labels" .Component | nindent 4 }}
spec:
  maxUnavailable: {{ .Values.scheduler.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels: {app.kubernetes.io/name: {{ .Component }}}
{{- end }}
{{- end -}}

{{- define "kai.schedulerDeployment" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Component }}
  namespace: {{ .Release.Namespace }}
  labels: {{- include "kai.labels" .Component | nindent 4 }}
spec:
  replicas: {{ .Values.scheduler.replicas }}   # with leader election one acts, the others stand by
  selector:
    matchLabels: {app.kubernetes.io/name: {{ .Component }}}
  template:
    metadata:
      labels:
        {{- include "kai.labels" .Component | nindent 8 }}
        app.kubernetes.io/component: scheduler  # every shard's scheduler, for the metrics Service
      annotations:
        # A changed config rolls the pods.
        kai.scheduler/config-sha256: {{ include "kai.config" . | sha256sum | trunc 16 }}
    spec:
      serviceAccountName: kai-scheduler
      {{- include "kai.podCommon" . | trim | nindent 6 }}
      containers:
        - name: kaid
          image: {{ include "kai.image" . }}
          imagePullPolicy: {{ .Values.global.imagePullPolicy }}
          args: [run, --config, /etc/kai/config.yaml, --identity, $(POD_NAME)]
          env:
            - name: POD_NAME
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
          ports:
            - {name: metrics, containerPort: {{ .Values.scheduler.ports.metricsPort }}}
          readinessProbe:
            httpGet: {path: /readyz, port: metrics}
            periodSeconds: 5
          livenessProbe:
            httpGet: {path: /healthz, port: metrics}
            initialDelaySeconds: 30
            periodSeconds: 10
          resources: {{- toYaml .Values.scheduler.resources | nindent 12 }}
          {{- include "kai.containerSecurityContext" . | nindent 10 }}
          volumeMounts:
            - {name: config, mountPath: /etc/kai, readOnly: true}
            - {name: tmp, mountPath: /tmp}
      volumes:
        - name: config
          configMap: {name: {{ .Component }}-config}
        - name: tmp
          emptyDir: {}
{{- end -}}
