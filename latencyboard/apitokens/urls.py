from django.urls import path

from latencyboard.apitokens import views

urlpatterns = [
    path("", views.tokens, name="api-tokens"),
    path("<int:token_id>/revoke/", views.revoke, name="api-token-revoke"),
]
