{{/* The pod template shared by the Deployment and the StatefulSet. */}}
{{- define "weir.podTemplate" -}}
metadata:
  labels:
    {{- include "weir.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "weir.serviceAccountName" . }}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: {{ include "weir.gracePeriod" . }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 10001
    runAsGroup: 10001
    fsGroup: 10001
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: weir
      image: {{ include "weir.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - serve
        - --config
        - /etc/weir/weir.toml
        - --listen
        - "0.0.0.0:5433"
        - --metrics-listen
        - "0.0.0.0:{{ .Values.metrics.port }}"
      env:
        - name: WEIR_UPSTREAM
          valueFrom:
            secretKeyRef:
              name: {{ include "weir.secretName" . }}
              key: {{ .Values.upstream.urlKey }}
        {{- if and (eq .Values.mode "statefulset") .Values.persistence.persistentSlots }}
        - name: WEIR_REPLICATION_SLOT
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- end }}
        {{- if .Values.upstream.passwordKey }}
        - name: WEIR_UPSTREAM_PASSWORD_FILE
          value: /var/run/weir/upstream-password
        {{- end }}
      ports:
        - name: postgresql
          containerPort: 5433
          protocol: TCP
        - name: metrics
          containerPort: {{ .Values.metrics.port }}
          protocol: TCP
      livenessProbe:
        httpGet:
          path: /healthz
          port: metrics
        {{- toYaml .Values.probes.liveness | nindent 8 }}
      readinessProbe:
        httpGet:
          path: /readyz
          port: metrics
        {{- toYaml .Values.probes.readiness | nindent 8 }}
      lifecycle:
        preStop:
          exec:
            command: ["sleep", "{{ .Values.preStopSeconds }}"]
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        privileged: false
        capabilities:
          drop: [ALL]
      volumeMounts:
        - name: config
          mountPath: /etc/weir
          readOnly: true
        - name: tmp
          mountPath: /tmp
        {{- if .Values.upstream.passwordKey }}
        - name: upstream-password
          mountPath: /var/run/weir
          readOnly: true
        {{- end }}
        {{- if eq .Values.mode "statefulset" }}
        - name: state
          mountPath: /var/lib/weir
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "weir.fullname" . }}
    - name: tmp
      emptyDir: {}
    {{- if .Values.upstream.passwordKey }}
    - name: upstream-password
      secret:
        secretName: {{ include "weir.secretName" . }}
        defaultMode: 0400
        items:
          - key: {{ .Values.upstream.passwordKey }}
            path: upstream-password
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
