# Debian packages of Granary, one per program, built by `cpack` in a build
# directory (scripts/package.sh): granaryd (with its systemd unit, the default
# configuration, and the groups the trust model names and the cluster token,
# created at install), granary-fuse (with its mount unit), granary (the CLI),
# granary-csi, granary-webhook and granary-extender. Runtime dependencies come from
# dpkg-shlibdeps, so the packages install with apt on any Debian 12 machine.

include(GNUInstallDirs)
# Packaging installs the programs alone: it need not build the test suites
# and benchmarks first.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

set(CPACK_COMPONENTS_ALL "")
# Installs `program` in package `package` (cpack component `component`).
macro(granary_package component package program summary)
  install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${component})
  string(TOUPPER ${component} upper)
  set(CPACK_DEBIAN_${upper}_PACKAGE_NAME ${package})
  set(CPACK_DEBIAN_${upper}_FILE_NAME DEB-DEFAULT)
  set(CPACK_COMPONENT_${upper}_DESCRIPTION "Granary, a cache for training data: ${summary}")
  list(APPEND CPACK_COMPONENTS_ALL ${component})
endmacro()

granary_package(server granaryd granaryd
  "the cache server of a node (datasets on local NVMe, read through from their source)")
granary_package(fuse granary-fuse granary-fuse "the read-only mount of every dataset")
granary_package(cli granary granary "the command line (datasets, prewarm, locate, status, cat)")
granary_package(csi granary-csi granary-csi "the Kubernetes CSI node plugin")
granary_package(webhook granary-webhook granary-webhook
  "the Kubernetes admission webhook giving pods affinity towards their cached datasets")
granary_package(extender granary-extender granary-extender
  "the Kubernetes scheduler extender scoring nodes by cached share")

install(FILES deploy/systemd/granaryd.service DESTINATION lib/systemd/system COMPONENT server)
install(FILES deploy/debian/granaryd.yaml DESTINATION /etc/granary COMPONENT server)
install(FILES deploy/systemd/granary-fuse@.service DESTINATION lib/systemd/system
  COMPONENT fuse)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME granary)
set(CPACK_PACKAGE_VENDOR Granary)
set(CPACK_PACKAGE_CONTACT "Granary developers <granary@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FUSE_PACKAGE_DEPENDS "fuse3")
set(CPACK_DEBIAN_FUSE_PACKAGE_RECOMMENDS "granaryd")
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "adduser, init-system-helpers")
set(CPACK_DEBIAN_SERVER_PACKAGE_RECOMMENDS "granary")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/deploy/debian/granaryd/postinst
  ${PROJECT_SOURCE_DIR}/deploy/debian/granaryd/prerm
  ${PROJECT_SOURCE_DIR}/deploy/debian/granaryd/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_OUTPUT_FILE_PREFIX packages)
include(CPack)
