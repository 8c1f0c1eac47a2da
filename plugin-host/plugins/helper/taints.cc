#include "plugins/helper/taints.h"

namespace podium::plugins {

bool ToleratesTaint(const v1::Toleration& toleration, const v1::Taint& taint) {
  if (toleration.effect() != v1::TAINT_EFFECT_UNSPECIFIED &&
      toleration.effect() != taint.effect()) {
    return false;
  }
  if (!toleration.key().empty() && toleration.key() != taint.key()) return false;
  switch (toleration.operator_()) {
    case v1::Toleration::EQUAL:
      return toleration.value() == taint.value();
    case v1::Toleration::EXISTS:
      return true;
    default:
      return false;
  }
}

const v1::Taint* FindUntoleratedDoNotScheduleTaint(const Taints& taints,
                                                   const Tolerations& tolerations) {
  for (const v1::Taint& taint : taints) {
    if (!IsDoNotScheduleTaint(taint)) continue;
    if (!TolerationsTolerateTaint(tolerations, taint)) return &taint;
  }
  return nullptr;
}

const v1::Taint& UnschedulableTaint() {
  static const v1::Taint* const taint = [] {
    auto* t = new v1::Taint();
    t->set_key("node.kubernetes.io/unschedulable");
    t->set_effect(v1::NO_SCHEDULE);
    return t;
  }();
  return *taint;
}

}  // namespace podium::plugins
