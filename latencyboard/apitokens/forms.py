from __future__ import annotations

from django import forms

from latencyboard.apitokens.models import ApiToken


class ApiTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["name", "scope"]
        widgets = {"scope": forms.RadioSelect}
