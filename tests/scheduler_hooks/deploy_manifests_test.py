#!/usr/bin/python3
"""Checks deploy/: every Kubernetes manifest parses and holds together (mount
propagation, the scheduler's extender stanza, the admission webhook's
configuration, ports and paths consistent across objects and with the
binaries' flags), the systemd units name real flags, and the Slurm hooks are
well formed.

Usage: deploy_manifests_test.py DEPLOY_DIR SLURM_HOOKS_DIR GRANARYD GRANARY_FUSE GRANARY_EXTENDER
       GRANARY_CSI GRANARY_WEBHOOK
"""
import configparser
import glob
import os
import re
import shlex
import subprocess
import sys
import unittest
import urllib.parse

import yaml

DEPLOY, SLURM_HOOKS, GRANARYD, GRANARY_FUSE, EXTENDER, GRANARY_CSI, WEBHOOK = sys.argv[1:8]
NAMESPACE = "granary-system"


def load_all():
    """(file name, document) for every document of every manifest."""
    documents = []
    for path in sorted(glob.glob(os.path.join(DEPLOY, "kubernetes", "*.yaml"))):
        with open(path) as f:
            for document in yaml.safe_load_all(f):
                if document is not None:
                    documents.append((os.path.basename(path), document))
    return documents


DOCUMENTS = load_all()


def find(kind, name):
    matches = [d for _, d in DOCUMENTS if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, "%d %s/%s" % (len(matches), kind, name)
    return matches[0]


def container(workload, name):
    spec = workload["spec"]["template"]["spec"]
    matches = [c for c in spec.get("initContainers", []) + spec["containers"] if c["name"] == name]
    assert len(matches) == 1, name
    return matches[0]


def flag_value(args, flag):
    """The value of --flag=V or --flag V in an argument list."""
    for i, arg in enumerate(args):
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
        if arg == flag:
            return args[i + 1]
    raise AssertionError("%s not in %s" % (flag, args))


def fuse_invocation(fuse):
    """The arguments the granary-fuse container's restart loop runs the
    binary with, and the loop's script."""
    script = fuse["args"][0]
    tokens = shlex.split(script.replace("\\\n", " "))
    start = tokens.index("/usr/bin/granary-fuse") + 1
    end = next(i for i in range(start, len(tokens)) if tokens[i].endswith(";"))
    return tokens[start:end] + [tokens[end].rstrip(";")], script


def help_text(binary):
    return subprocess.run([binary, "--help"], capture_output=True, text=True).stdout


def long_flags(args):
    return {a.split("=", 1)[0] for a in args if a.startswith("--")}


class KubernetesTest(unittest.TestCase):
    def test_every_document_is_a_named_object_in_the_namespace(self):
        self.assertGreaterEqual(len(DOCUMENTS), 15)
        cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CSIDriver",
                          "PersistentVolume", "MutatingWebhookConfiguration"}
        for path, document in DOCUMENTS:
            for key in ("apiVersion", "kind", "metadata"):
                self.assertIn(key, document, path)
            self.assertTrue(document["metadata"].get("name"), path)
            if document["kind"] in cluster_scoped:
                continue
            namespace = document["metadata"].get("namespace")
            # The scheduler reads the authentication ConfigMap in kube-system;
            # the example job runs in the user's namespace.
            allowed = {NAMESPACE, "kube-system"} if document["kind"] == "RoleBinding" else {NAMESPACE}
            if path in ("training-job.yaml", "training-job-client.yaml", "dataset-volume.yaml"):
                allowed = {"default"}
            self.assertIn(namespace, allowed, "%s %s" % (path, document["metadata"]["name"]))
        find("Namespace", NAMESPACE)

    def test_daemonset_runs_granaryd_and_fuse_with_bidirectional_propagation(self):
        daemonset = find("DaemonSet", "granary-node-rack-a")
        spec = daemonset["spec"]["template"]["spec"]
        self.assertEqual(daemonset["spec"]["selector"]["matchLabels"],
                         {k: v for k, v in daemonset["spec"]["template"]["metadata"]["labels"].items()
                          if k in daemonset["spec"]["selector"]["matchLabels"]})
        volumes = {v["name"]: v for v in spec["volumes"]}
        fuse = container(daemonset, "granary-fuse")
        self.assertTrue(fuse["securityContext"]["privileged"])
        mounts = {m["mountPath"]: m for m in fuse["volumeMounts"]}
        fuse_args, script = fuse_invocation(fuse)
        self.assertEqual(fuse["command"], ["/bin/sh", "-c"])
        # Restarted in the container until it exits 0 (unmounted), so a
        # crash is taken over from the connection keeper in this container.
        self.assertIn("until /usr/bin/granary-fuse", script)
        self.assertEqual(fuse_args[0], "/mnt/granary")
        self.assertEqual(mounts["/mnt/granary"]["mountPropagation"], "Bidirectional")
        self.assertEqual(volumes[mounts["/mnt/granary"]["name"]]["hostPath"]["path"], "/mnt/granary")
        self.assertEqual(volumes[mounts["/dev/fuse"]["name"]]["hostPath"]["type"], "CharDevice")

        granaryd = container(daemonset, "granaryd")
        data = {m["mountPath"]: m["name"] for m in granaryd["volumeMounts"]}
        self.assertEqual(volumes[data["/var/lib/granary"]]["hostPath"]["path"], "/var/lib/granary")
        # The node id is the Kubernetes node name, as the extender's node names.
        self.assertEqual(flag_value(granaryd["args"], "--node-id"), "$(NODE_NAME)")
        self.assertEqual(granaryd["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName")

        # Ports and paths agree with granaryd's configuration.
        config = yaml.safe_load(find("ConfigMap", "granaryd-config")["data"]["granaryd.yaml"])
        ports = {p["name"]: p["containerPort"] for p in granaryd["ports"]}
        self.assertEqual(int(config["listen"].rsplit(":", 1)[1]), ports["peer"])
        self.assertEqual(int(config["metrics_listen"].rsplit(":", 1)[1]), ports["metrics"])
        self.assertEqual(flag_value(fuse_args, "--server"), "unix:" + config["socket"])
        socket_dir = os.path.dirname(config["socket"])
        self.assertIn(socket_dir, {m["mountPath"] for m in granaryd["volumeMounts"]})
        self.assertIn(socket_dir, mounts)
        config_mount = [m for m in granaryd["volumeMounts"] if m["name"] == "config"][0]
        self.assertEqual(flag_value(granaryd["args"], "--config"),
                         config_mount["mountPath"] + "/granaryd.yaml")
        self.assertTrue(config["cache_dirs"][0].startswith(config["data_dir"]))

        # Every flag exists in the binaries.
        self.assertTrue(long_flags(granaryd["args"]) <= set(re.findall(r"--[a-z-]+", help_text(GRANARYD))))
        self.assertTrue(long_flags(fuse_args) <= set(re.findall(r"--[a-z-]+", help_text(GRANARY_FUSE))))

        # One DaemonSet per cache group: its nodes, its --group.
        group = daemonset["spec"]["selector"]["matchLabels"]["granary.io/group"]
        self.assertEqual(spec["nodeSelector"]["granary.io/group"], group)
        self.assertEqual(flag_value(granaryd["args"], "--group"), group)
        # Membership through etcd, at the node's address.
        self.assertTrue(config["etcd"].startswith("http://"))
        self.assertEqual(flag_value(granaryd["args"], "--advertise"), "$(NODE_IP):%d" % ports["peer"])
        env = {e["name"]: e for e in granaryd["env"]}
        self.assertEqual(env["NODE_IP"]["valueFrom"]["fieldRef"]["fieldPath"], "status.hostIP")

        # The cluster token reaches both containers read-only.
        for c, args in ((granaryd, granaryd["args"]), (fuse, fuse_args)):
            self.assertTokenMounted(spec, c, args)

        # The Service fronts the granaryd of every group.
        service = find("Service", "granary-node")
        self.assertLessEqual(service["spec"]["selector"].items(),
                             daemonset["spec"]["selector"]["matchLabels"].items())
        self.assertNotIn("granary.io/group", service["spec"]["selector"])
        self.assertEqual(service["spec"]["ports"][0]["targetPort"], "peer")

    def assertTokenMounted(self, pod_spec, c, args):
        """`c`, run with `args`, gets --token-file of a read-only mount of the
        granary-cluster-token Secret."""
        token_file = flag_value(args, "--token-file")
        volumes = {v["name"]: v for v in pod_spec["volumes"]}
        [mount] = [m for m in c["volumeMounts"] if token_file.startswith(m["mountPath"] + "/")]
        self.assertIs(mount["readOnly"], True, c["name"])
        secret = volumes[mount["name"]]["secret"]
        self.assertEqual(secret["secretName"], "granary-cluster-token")
        self.assertEqual(secret["defaultMode"], 0o400)
        key = token_file[len(mount["mountPath"]) + 1:]
        self.assertIn(key, find("Secret", "granary-cluster-token")["stringData"])

    def test_extender_deployment_service_and_scheduler_configuration_agree(self):
        deployment = find("Deployment", "granary-extender")
        extender = container(deployment, "granary-extender")
        self.assertTrue(long_flags(extender["args"]) <=
                        set(re.findall(r"--[a-z-]+", help_text(EXTENDER))))
        listen_port = int(flag_value(extender["args"], "--listen").rsplit(":", 1)[1])
        container_port = {p["name"]: p["containerPort"] for p in extender["ports"]}["http"]
        self.assertEqual(listen_port, container_port)
        self.assertEqual(extender["readinessProbe"]["httpGet"]["path"], "/healthz")

        service = find("Service", "granary-extender")
        self.assertEqual(service["spec"]["selector"], deployment["spec"]["selector"]["matchLabels"])
        self.assertEqual(service["spec"]["ports"][0]["targetPort"], "http")

        # granaryd through its Service, on the peer port.
        server = flag_value(extender["args"], "--server")
        self.assertTokenMounted(deployment["spec"]["template"]["spec"], extender, extender["args"])
        node_service = find("Service", "granary-node")
        self.assertEqual(server, "granary-node.%s.svc:%d" % (NAMESPACE, node_service["spec"]["ports"][0]["port"]))

        config = yaml.safe_load(find("ConfigMap", "granary-scheduler-config")["data"]["config.yaml"])
        self.assertEqual(config["apiVersion"], "kubescheduler.config.k8s.io/v1")
        self.assertEqual(config["kind"], "KubeSchedulerConfiguration")
        self.assertEqual(config["profiles"][0]["schedulerName"], "granary-scheduler")
        [stanza] = config["extenders"]
        self.assertIs(stanza["ignorable"], True)
        self.assertIs(stanza["nodeCacheCapable"], True)
        self.assertEqual(stanza["filterVerb"], "filter")
        self.assertEqual(stanza["prioritizeVerb"], "prioritize")
        self.assertGreaterEqual(stanza["weight"], 1)
        self.assertIs(stanza["enableHTTPS"], False)
        url = urllib.parse.urlparse(stanza["urlPrefix"])
        self.assertEqual(url.scheme, "http")
        self.assertEqual(url.hostname, "granary-extender.%s.svc" % NAMESPACE)
        self.assertEqual(url.port, service["spec"]["ports"][0]["port"])
        self.assertEqual(url.path, "")  # The extender serves /filter and /prioritize.
        self.assertEqual(config["leaderElection"]["resourceNamespace"], NAMESPACE)

        scheduler = find("Deployment", "granary-scheduler")
        self.assertEqual(scheduler["spec"]["template"]["spec"]["serviceAccountName"], "granary-scheduler")
        command = container(scheduler, "kube-scheduler")["command"]
        volume = scheduler["spec"]["template"]["spec"]["volumes"][0]
        self.assertEqual(volume["configMap"]["name"], "granary-scheduler-config")
        self.assertIn("--config=/etc/granary-scheduler/config.yaml", command)
        find("ServiceAccount", "granary-scheduler")
        bindings = [d for _, d in DOCUMENTS if d["kind"] == "ClusterRoleBinding"]
        self.assertEqual({b["roleRef"]["name"] for b in bindings},
                         {"system:kube-scheduler", "system:volume-scheduler"})

    def test_webhook_deployment_service_secret_and_configuration_agree(self):
        deployment = find("Deployment", "granary-webhook")
        pod_spec = deployment["spec"]["template"]["spec"]
        webhook = container(deployment, "granary-webhook")
        self.assertEqual(webhook["command"], ["/usr/bin/granary-webhook"])
        self.assertTrue(long_flags(webhook["args"]) <=
                        set(re.findall(r"--[a-z-]+", help_text(WEBHOOK))))
        listen_port = int(flag_value(webhook["args"], "--listen").rsplit(":", 1)[1])
        self.assertEqual({p["name"]: p["containerPort"] for p in webhook["ports"]}["https"], listen_port)
        for probe in ("readinessProbe", "livenessProbe"):
            self.assertEqual(webhook[probe]["httpGet"],
                             {"path": "/healthz", "port": "https", "scheme": "HTTPS"})

        # The certificate and key, from the kubernetes.io/tls Secret.
        volumes = {v["name"]: v for v in pod_spec["volumes"]}
        mounts = {m["name"]: m for m in webhook["volumeMounts"]}
        secret = find("Secret", "granary-webhook-tls")
        self.assertEqual(secret["type"], "kubernetes.io/tls")
        for flag, key in (("--tls-cert-file", "tls.crt"), ("--tls-key-file", "tls.key")):
            path = flag_value(webhook["args"], flag)
            [name] = [n for n, m in mounts.items() if path == m["mountPath"] + "/" + key]
            self.assertIs(mounts[name]["readOnly"], True)
            self.assertEqual(volumes[name]["secret"]["secretName"], "granary-webhook-tls")
            self.assertIn(key, secret["stringData"])

        server = flag_value(webhook["args"], "--server")
        self.assertTokenMounted(pod_spec, webhook, webhook["args"])
        node_service = find("Service", "granary-node")
        self.assertEqual(server, "granary-node.%s.svc:%d" % (NAMESPACE, node_service["spec"]["ports"][0]["port"]))

        service = find("Service", "granary-webhook")
        self.assertEqual(service["spec"]["selector"], deployment["spec"]["selector"]["matchLabels"])
        [port] = service["spec"]["ports"]
        self.assertEqual(port["targetPort"], "https")

        configuration = find("MutatingWebhookConfiguration", "granary-webhook")
        [hook] = configuration["webhooks"]
        self.assertEqual(hook["admissionReviewVersions"], ["v1"])
        # A pod is never refused or held up because of Granary.
        self.assertEqual(hook["failurePolicy"], "Ignore")
        self.assertLessEqual(hook["timeoutSeconds"], 10)
        self.assertEqual(hook["sideEffects"], "NoneOnDryRun")
        self.assertEqual(hook["clientConfig"]["service"],
                         {"name": "granary-webhook", "namespace": NAMESPACE, "path": "/mutate",
                          "port": port["port"]})
        [rule] = hook["rules"]
        self.assertEqual((rule["operations"], rule["apiGroups"], rule["apiVersions"], rule["resources"]),
                         (["CREATE"], [""], ["v1"], ["pods"]))
        [excluded] = hook["namespaceSelector"]["matchExpressions"]
        self.assertEqual((excluded["key"], excluded["operator"]), ("kubernetes.io/metadata.name", "NotIn"))
        self.assertIn(NAMESPACE, excluded["values"])
        self.assertEqual(configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                         "%s/%s" % (NAMESPACE, service["metadata"]["name"]))

    def test_training_job_reads_its_dataset_from_a_granary_claim_without_host_paths(self):
        job = find("Job", "resnet-train")
        template = job["spec"]["template"]
        self.assertEqual(template["spec"]["schedulerName"], "granary-scheduler")
        datasets = template["metadata"]["annotations"]["granary.io/datasets"]
        self.assertTrue(datasets)
        volumes = {v["name"]: v for v in template["spec"]["volumes"]}
        self.assertFalse([v for v in volumes.values() if "hostPath" in v])
        trainer = container(job, "trainer")
        [mount] = [m for m in trainer["volumeMounts"] if m["mountPath"].startswith("/data")]
        self.assertTrue(mount["readOnly"])
        claim = find("PersistentVolumeClaim", volumes[mount["name"]]["persistentVolumeClaim"]["claimName"])
        self.assertEqual(claim["metadata"]["namespace"], job["metadata"]["namespace"])
        volume = find("PersistentVolume", claim["spec"]["volumeName"])
        self.assertEqual(volume["spec"]["accessModes"], ["ReadOnlyMany"])
        self.assertEqual(volume["spec"]["csi"]["driver"], find("CSIDriver", "csi.granary.io")["metadata"]["name"])
        self.assertTrue(volume["spec"]["csi"]["readOnly"])
        # The annotation the scheduler and the prewarm read names the PV's dataset.
        self.assertIn(volume["spec"]["csi"]["volumeAttributes"]["dataset"], datasets.split(","))
        self.assertFalse(find("CSIDriver", "csi.granary.io")["spec"]["attachRequired"])

    def test_daemonset_runs_granary_csi_registered_with_the_kubelet(self):
        daemonset = find("DaemonSet", "granary-node-rack-a")
        spec = daemonset["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        csi = container(daemonset, "granary-csi")
        self.assertTrue(csi["securityContext"]["privileged"])
        self.assertTrue(long_flags(csi["args"]) <= set(re.findall(r"--[a-z-]+", help_text(GRANARY_CSI))))
        mounts = {m["mountPath"]: m for m in csi["volumeMounts"]}
        self.assertEqual(mounts["/mnt/granary"]["mountPropagation"], "HostToContainer")
        self.assertEqual(mounts["/var/lib/kubelet/pods"]["mountPropagation"], "Bidirectional")
        self.assertEqual(volumes[mounts["/var/lib/kubelet/pods"]["name"]]["hostPath"]["path"],
                         "/var/lib/kubelet/pods")
        self.assertEqual(flag_value(csi["args"], "--mount"), fuse_invocation(container(daemonset, "granary-fuse"))[0][0])
        granaryd = container(daemonset, "granaryd")
        self.assertEqual(flag_value(csi["args"], "--group"), flag_value(granaryd["args"], "--group"))
        self.assertEqual(flag_value(csi["args"], "--node-id"), "$(NODE_NAME)")
        config = yaml.safe_load(find("ConfigMap", "granaryd-config")["data"]["granaryd.yaml"])
        self.assertEqual(flag_value(csi["args"], "--server"), "unix:" + config["socket"])

        # The registrar hands the kubelet the socket granary-csi serves, by
        # its path on the host.
        endpoint = flag_value(csi["args"], "--endpoint")
        self.assertTrue(endpoint.startswith("unix://"))
        socket = endpoint[len("unix://"):]
        registrar = container(daemonset, "node-driver-registrar")
        self.assertEqual(flag_value(registrar["args"], "--csi-address"), socket)
        socket_volume = volumes[mounts[os.path.dirname(socket)]["name"]]["hostPath"]["path"]
        self.assertEqual(socket_volume, "/var/lib/kubelet/plugins/csi.granary.io")
        self.assertEqual(flag_value(registrar["args"], "--kubelet-registration-path"),
                         os.path.join(socket_volume, os.path.basename(socket)))
        registration = {m["mountPath"]: m["name"] for m in registrar["volumeMounts"]}
        self.assertEqual(volumes[registration["/registration"]]["hostPath"]["path"],
                         "/var/lib/kubelet/plugins_registry")


class SystemdTest(unittest.TestCase):
    def unit(self, name):
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.optionxform = str
        parser.read(os.path.join(DEPLOY, "systemd", name))
        return parser

    def test_granaryd_unit(self):
        unit = self.unit("granaryd.service")
        command = unit["Service"]["ExecStart"].split()
        self.assertTrue(command[0].endswith("/granaryd"))
        self.assertTrue(long_flags(command) <= set(re.findall(r"--[a-z-]+", help_text(GRANARYD))))
        self.assertEqual(flag_value(command, "--socket"), "/run/granary/granaryd.sock")
        self.assertEqual(flag_value(command, "--token-file"), "/etc/granary/token")
        self.assertEqual(unit["Install"]["WantedBy"], "multi-user.target")

    def test_fuse_template_unit_mounts_its_instance(self):
        unit = self.unit("granary-fuse@.service")
        command = unit["Service"]["ExecStart"].split()
        self.assertTrue(command[0].endswith("/granary-fuse"))
        # %f: the instance name unescaped as a path (granary-fuse@mnt-granary -> /mnt/granary).
        self.assertEqual(command[1], "%f")
        self.assertIn("--foreground", command)
        self.assertEqual(flag_value(command, "--server"), "unix:/run/granary/granaryd.sock")
        self.assertEqual(flag_value(command, "--token-file"), "/etc/granary/token")
        self.assertTrue(long_flags(command) <= set(re.findall(r"--[a-z-]+", help_text(GRANARY_FUSE))))
        self.assertIn("granaryd.service", unit["Unit"]["Requires"])
        # Reload upgrades in place; a crash is restarted and takes the mount
        # over from the keeper, which a stop of the main process spares.
        reload = unit["Service"]["ExecReload"].split()
        self.assertEqual(reload[:3], command[:1] + ["%f", "--takeover"])
        self.assertNotIn("--foreground", reload)
        self.assertTrue(long_flags(reload) <= set(re.findall(r"--[a-z-]+", help_text(GRANARY_FUSE))))
        self.assertEqual(unit["Service"]["Type"], "notify")
        self.assertEqual(unit["Service"]["NotifyAccess"], "all")
        self.assertEqual(unit["Service"]["KillMode"], "process")
        self.assertEqual(unit["Service"]["Restart"], "always")


class SlurmTest(unittest.TestCase):
    def test_conf_lines_name_the_shipped_hooks(self):
        with open(os.path.join(DEPLOY, "slurm", "slurm.conf.granary")) as f:
            lines = dict(l.strip().split("=", 1) for l in f if l.strip() and not l.startswith("#"))
        self.assertEqual(lines["JobSubmitPlugins"], "lua")
        self.assertEqual(lines["BurstBufferType"], "burst_buffer/lua")
        for hook in ("PrologSlurmctld", "Epilog"):
            self.assertTrue(os.access(os.path.join(SLURM_HOOKS, os.path.basename(lines[hook])),
                                      os.X_OK), hook)

    def test_burst_buffer_defines_the_22_05_functions(self):
        with open(os.path.join(SLURM_HOOKS, "burst_buffer.lua")) as f:
            text = f.read()
        for signature in ("slurm_bb_job_process(job_script)", "slurm_bb_pools()",
                          "slurm_bb_job_teardown(job_id, job_script, hurry)",
                          "slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)",
                          "slurm_bb_data_in(job_id, job_script)", "slurm_bb_real_size(job_id)",
                          "slurm_bb_paths(job_id, job_script, path_file)",
                          "slurm_bb_pre_run(job_id, job_script)",
                          "slurm_bb_post_run(job_id, job_script)",
                          "slurm_bb_data_out(job_id, job_script)", "slurm_bb_get_status(...)"):
            self.assertIn("function " + signature, text)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
